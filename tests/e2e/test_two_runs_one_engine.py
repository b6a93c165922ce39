"""Two runs at once in one engine through the Python API (:class:`~agent_fleet.control.FleetHost`).

One store, one gateway, one admission controller. Team A's run borrows team B's idle quota; team B's
higher-priority run then reclaims it: A's borrowing sessions are preempted (``InCohortReclamation``),
pause, are readmitted once B's sessions end, and finish from their session log. Both runs complete
with every partition's results exactly once, and the provider never sees more calls in flight than
the gateway's one cap.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_fleet.control import FleetHost
from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.provider import SimConfig

from .conftest import write_lines
from .test_admission_live import _check_results, _run_events
from .test_serve_cohort import KUEUE_YAML

pytestmark = pytest.mark.timeout(180)

CAP = 30


def _usage(host: FleetHost, cluster_queue: str) -> float:
    row = next(r for r in host.controller.snapshot()["cluster_queues"] if r["name"] == cluster_queue)
    return float(sum(res["usage_count"] for res in row["resources"]))


async def test_a_higher_priority_run_reclaims_the_other_runs_borrowed_sessions(tmp_path: Path) -> None:
    (tmp_path / "kueue.yaml").write_text(KUEUE_YAML)
    config = tmp_path / "fleet.yaml"
    config.write_text(f"rate_limit: {{baseline_concurrency: {CAP}, adaptive: false}}\nqueues: kueue.yaml\n")
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    write_lines(tmp_path / "a.txt", 600)
    write_lines(tmp_path / "b.txt", 50)

    def options(name: str, agents: int, queue: str, priority: str | None = None) -> RunOptions:
        return RunOptions(
            task="Summarise each page",
            input_path=f"{name}.txt",
            agents=agents,
            embedder="lexical",
            queue=queue,
            priority=priority,
        )

    async with SimProvider(SimConfig(latency=0.6, seed=29)) as sim:
        env = {"FLEET_BASE_URL": sim.base_url, "FLEET_API_KEY": "sk-test"}
        async with (
            asyncio.timeout(150),
            FleetHost.open(store_url=store, config_path=str(config), env=env, workdir=str(tmp_path)) as host,
        ):
            run_a = await host.submit(options("a", 30, "team-a"))
            while _usage(host, "team-a") < 30:  # A borrows all of B's idle quota
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)  # its sessions have calls in flight and results recorded
            run_b = await host.submit(options("b", 10, "team-b", priority="high"))
            assert host.active(run_a) and host.active(run_b)  # two runs live in one engine
            await host.wait(run_b)
            await host.wait(run_a)
            reports = dict(host.reports)
            assert not host.controller.workloads  # nothing left behind in the controller
        stats = sim.stats()

    assert reports[run_a].status == reports[run_b].status == "completed"
    assert reports[run_a].summary["results_raw"] == 600 and reports[run_b].summary["results_raw"] == 50
    assert 1 < stats["max_in_flight"] <= CAP, stats

    plan_a, events_a = await _run_events(store, run_a)
    plan_b, events_b = await _run_events(store, run_b)
    _check_results(plan_a, events_a)
    _check_results(plan_b, events_b)
    preempted = [e for e in events_a if e.type == EventType.SESSION_PREEMPTED]
    assert preempted and {e.data["reason"] for e in preempted} == {"InCohortReclamation"}
    assert all(str(e.data["by"]).startswith(run_b) for e in preempted)
    assert not any(e.type == EventType.SESSION_PREEMPTED for e in events_b)
    for sid in {e.session_id for e in preempted}:
        types = [e.type for e in sorted((e for e in events_a if e.session_id == sid), key=lambda e: e.seq)]
        last = max(i for i, t in enumerate(types) if t == EventType.SESSION_PREEMPTED)
        assert EventType.SESSION_COMPLETED in types[last:], types
        # preempted between turns or at a turn boundary: no call was sent twice
        assert EventType.MODEL_RESENT not in types, types
