"""Two teams' runs in one ``agent-fleet serve``, submitted from the CLI, sharing one Kueue cohort.

Team A (nominal 20 pods) starts first and borrows team B's idle 10: 30 of its 90 sessions run. Team B
(nominal 10, ``reclaimWithinCohort: Any``) then submits a higher-priority run: Kueue reclaims B's
quota, A's borrowing sessions are preempted in flight with ``InCohortReclamation``, wait, resume
from their session log and finish. Both runs complete with every partition's results exactly once,
and ``/metrics`` counts the preemptions as the session log records them.

Then five runs of 200 sessions each at once: the provider never sees more calls in flight than the
server's one cap.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.sim.provider import LogNormalLatency, SimConfig, sim_provider_process

from .conftest import Cli, write_lines
from .test_admission_live import _check_results, _run_events, cohort_yaml
from .test_serve import ADMIN, TOKEN_A, TOKEN_B, Served, _provider_stats, _reset, _wait_ended, serve_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CAP = 30  # the gateway's one concurrency limit, for every run of the server
A_NOMINAL, B_NOMINAL = 20, 10
# Team A's sessions hold twenty items each (five calls of 0.8 s), so that its three waves (about 12 s)
# outlast B's deploy, a CLI start that takes seconds on a busy machine.
A_ITEMS = 1800

KUEUE_YAML = cohort_yaml({"team-a": (A_NOMINAL, False), "team-b": (B_NOMINAL, True)}, {"high": 1000})

FLEET_YAML = f"""
rate_limit: {{baseline_concurrency: {CAP}, adaptive: false}}
queues: kueue.yaml
teams:
  alpha: {{token_env: ALPHA_TOKEN, queues: [default/team-a]}}
  beta: {{token_env: BETA_TOKEN, queues: [default/team-b]}}
"""


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=LogNormalLatency(median=0.8, sigma=0.2), seed=19)) as url:
        yield url


@pytest.fixture
def cohort(tmp_path: Path, provider: str) -> Iterator[Served]:
    (tmp_path / "kueue.yaml").write_text(KUEUE_YAML)
    with serve_process(tmp_path, provider, FLEET_YAML) as s:
        yield s


def _metric(text: str, name: str, **labels: str) -> float:
    """The sum of a family's samples whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", line)
        if m is None:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def _deploy(served: Served, token: str, *args: str) -> str:
    """``agent-fleet deploy --server URL --detach`` as a team: the run id it prints."""
    cli = Cli(cwd=served.cwd, base_url="", store="")
    proc = cli.run("deploy", *args, "--server", served.url, "--detach", FLEET_TOKEN=token, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"[\w-]+", run_id), proc.stdout
    return run_id


def test_a_higher_priority_team_reclaims_borrowed_sessions(cohort: Served, provider: str) -> None:
    write_lines(cohort.cwd / "inputs" / "alpha" / "a.txt", A_ITEMS)
    write_lines(cohort.cwd / "inputs" / "beta" / "b.txt", 50)
    _reset(provider)
    common = ("--task", "Summarise each page", "--embedder", "lexical")
    # 90 sessions: A keeps borrowing for three waves, so B's deploy (a CLI start, slow on a busy machine)
    # lands while borrowed sessions are in flight; with 30 the whole of A could end first.
    run_a = _deploy(cohort, TOKEN_A, *common, "--input", "inputs/alpha/a.txt", "--agents", "90", "--queue", "team-a")
    with cohort.client(ADMIN) as admin:
        deadline = time.monotonic() + 90
        while _metric(admin.get("/metrics").text, "kueue_cluster_queue_resource_usage", cluster_queue="team-a") < 30:
            assert time.monotonic() < deadline, "team A never borrowed team B's quota"
            time.sleep(0.2)
        time.sleep(1.5)  # A's borrowing sessions are in flight with results recorded
        run_b = _deploy(
            cohort,
            TOKEN_B,
            *common,
            "--input",
            "inputs/beta/b.txt",
            "--agents",
            "10",
            "--queue",
            "team-b",
            "--priority",
            "high",
        )
        with cohort.client(TOKEN_A) as a, cohort.client(TOKEN_B) as b:
            done_b = _wait_ended(b, run_b)
            done_a = _wait_ended(a, run_a)
        metrics = admin.get("/metrics").text
    assert done_a["status"] == done_b["status"] == "completed", (done_a, done_b)
    assert done_a["results_raw"] == A_ITEMS and done_b["results_raw"] == 50
    assert _provider_stats(provider)["max_in_flight"] <= CAP

    cohort.proc.terminate()
    cohort.proc.communicate(timeout=60)
    store = f"sqlite:///{cohort.store}"
    plan_a, events_a = asyncio.run(_run_events(store, run_a))
    plan_b, events_b = asyncio.run(_run_events(store, run_b))
    _check_results(plan_a, events_a)  # every partition's results exactly once
    _check_results(plan_b, events_b)
    preempted = [e for e in events_a if e.type == EventType.SESSION_PREEMPTED]
    assert preempted, "no session of team A was preempted"
    assert {e.data["reason"] for e in preempted} == {"InCohortReclamation"}
    assert all(str(e.data["by"]).startswith(run_b) for e in preempted), [e.data["by"] for e in preempted]
    assert not [e for e in events_b if e.type == EventType.SESSION_PREEMPTED]
    for sid in {e.session_id for e in preempted}:
        types = [e.type for e in sorted((e for e in events_a if e.session_id == sid), key=lambda e: e.seq)]
        last = max(i for i, t in enumerate(types) if t == EventType.SESSION_PREEMPTED)
        assert EventType.SESSION_COMPLETED in types[last:], types  # paused, readmitted, finished
    # /metrics counts what the log holds, once (both runs' figures come from the one controller)
    got = _metric(
        metrics, "kueue_preempted_workloads_total", preempting_cluster_queue="team-b", reason="InCohortReclamation"
    )
    assert got == len(preempted), (got, len(preempted))
    sessions = len(plan_a.partitions) + len(plan_b.partitions) + len(preempted)
    evicted = _metric(metrics, "kueue_evicted_workloads_total", cluster_queue="team-a", reason="Preempted")
    assert evicted == len(preempted)
    # every session admitted, each preempted one again (one readmitted while its call drained is
    # withdrawn when the attempt stops and admitted once more)
    assert _metric(metrics, "kueue_admitted_workloads_total") >= sessions


def test_five_runs_of_200_sessions_share_the_one_cap(tmp_path: Path) -> None:
    cap = 24
    fleet_yaml = f"rate_limit: {{baseline_concurrency: {cap}, adaptive: false}}\n"
    sim = SimConfig(latency=LogNormalLatency(median=0.05, sigma=0.3), seed=23)
    with sim_provider_process(sim) as provider, serve_process(tmp_path, provider, fleet_yaml) as served:
        runs = []
        with served.client(ADMIN) as c:
            for i in range(5):
                write_lines(tmp_path / f"in{i}.txt", 200)
                body = {"task": "Summarise each page", "input_path": f"in{i}.txt", "agents": 200, "embedder": "lexical"}
                r = c.post("/v1/runs", json=body)
                assert r.status_code == 202, r.text
                runs.append(r.json()["run_id"])
            done = [_wait_ended(c, run_id, timeout=240) for run_id in runs]
        stats = _provider_stats(provider)
    assert [d["status"] for d in done] == ["completed"] * 5, done
    assert sum(d["summary"]["partitions"] for d in done) == 1000
    assert sum(d["results_raw"] for d in done) == 1000
    assert stats["requests_total"] >= 1000
    assert 1 < stats["max_in_flight"] <= cap, stats
