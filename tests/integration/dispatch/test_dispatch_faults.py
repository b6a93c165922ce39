"""Fault injection against a live run: 10 % of the workers crash mid-session, 5 % hang, and sandboxes
die under running tool calls. The run must complete with exactly the results of a clean run (every
partition one result set: nothing lost, nothing recorded twice), and every bad worker must leave the
pool after exactly three consecutive failures while no good worker is charged one.

The run is real: decompose → admission → dispatch on the worker pool → harness → gateway → the
simulated provider over loopback HTTP; file tools read inside per-session sandboxes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.config import load_config
from agent_fleet.dispatch.health import BreakerState
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.engine import Engine, RunOptions, RunReport, plan_run, with_config
from agent_fleet.engine.workforce import Workforce
from agent_fleet.hands.sandbox import LocalSandboxProvider
from agent_fleet.session import open_store
from agent_fleet.sim.provider import LogNormalLatency, SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import build_provider
from agent_fleet.testing.faults import FaultySandboxes, WorkerFaults

WORKERS = 40
SESSIONS = 160
SOURCE = """def handler_{i}(data):
    try:
        return eval(data)
    except:
        return None
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    """0755 all the way down, so an unprivileged sandbox user can reach its workspace."""
    top = Path(tempfile.mkdtemp(prefix="fleet-faults-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def make_input(root: Path) -> Path:
    src = root / "code"
    for i in range(SESSIONS):
        f = src / f"pkg{i // 40}" / f"mod_{i:03d}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(SOURCE.format(i=i))
    return src


@dataclass
class Fleet:
    report: RunReport
    events: list[Event]
    workforce: Workforce
    engine: Engine


async def run_fleet(root: Path, name: str, sim_url: str, *, faults: WorkerFaults | None, sandbox_rate: float) -> Fleet:
    config = root / f"{name}.yaml"
    config.write_text(
        f"hands: {{files: sandbox, sandbox_root: {root / 'sandboxes'}}}\n"
        f"dispatch: {{workers: {WORKERS}, check_interval_s: 0.1, hung_after_s: 0.5, breaker_cooldown_s: 600}}\n"
    )
    options = RunOptions(
        task="Review this code",
        input_path=str(root / "code"),
        agents=SESSIONS,
        provider=sim_url,
        out_dir=str(root / name),
        config_path=str(config),
        embedder="lexical",
    )
    options = with_config(options, load_config(config))
    plan = plan_run(options)
    assert len(plan.partitions) == SESSIONS
    log = open_store(f"sqlite:///{root / name}.db")
    await log.open()
    provider = build_provider(sim_url, api_key="sk-faults-test", model=options.model, max_connections=80)
    run_id = f"run-{name}"
    gateway = Gateway(provider, concurrency=64, session_tokens=options.budget_tokens, run_id=run_id)
    sandboxes: list[FaultySandboxes] = []

    def wrap(inner: Any) -> Any:
        assert isinstance(inner, LocalSandboxProvider)
        # reads are retried twice in a fresh sandbox: at most two deaths in a row keep results exact
        sandboxes.append(FaultySandboxes(inner, rate=sandbox_rate, seed=11, max_in_a_row=2))
        return sandboxes[-1]

    workforce = await Workforce.open(
        run_id=run_id, config_path=str(config), gateway=gateway, log=log, interpose=faults, wrap_sandboxes=wrap
    )
    engine = Engine(log=log, gateway=gateway, workforce=workforce)
    try:
        await engine.create_run(plan, options, run_id=run_id)
        await engine.dispatch(run_id, plan, options)
        report = await engine.aggregate(run_id, options)
        events = await log.events_of_run(run_id)
    finally:
        await engine.shutdown()
    if sandbox_rate:
        assert sandboxes and sandboxes[0].killed > 0, "no sandbox died: the fault was not exercised"
    return Fleet(report, events, workforce, engine)


def agent_calls(events: list[Event]) -> tuple[int, int, int]:
    """(recorded model calls, input tokens, output tokens) of the agent sessions."""
    responses = [ChatResponse.from_dict(e.data["response"]) for e in events if e.type == EventType.MODEL_RESPONSE]
    return len(responses), sum(r.usage.input_tokens for r in responses), sum(r.usage.output_tokens for r in responses)


def results_by_partition(events: list[Event]) -> dict[str, list[tuple[str, str, str]]]:
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for e in events:
        if e.type == EventType.RESULT_ITEM:
            out[e.data["partition_id"]].append((e.data["title"], e.data["body"], e.data["location"]))
    return {k: sorted(v) for k, v in out.items()}


async def test_crashing_hanging_workers_and_dying_sandboxes(workdir: Path) -> None:
    make_input(workdir)
    latency = LogNormalLatency(median=0.05, sigma=0.3)
    async with SimProvider(SimConfig(latency=latency, seed=5)) as sim:
        clean = await run_fleet(workdir, "clean", sim.base_url, faults=None, sandbox_rate=0.0)
        workers = [f"w{i:05d}" for i in range(WORKERS)]
        faults = WorkerFaults.pick(workers, crash_rate=0.10, hang_rate=0.05, seed=3)
        faulty = await run_fleet(workdir, "faulty", sim.base_url, faults=faults, sandbox_rate=0.10)

    # the run completes, with exactly the clean run's results: one result set per partition
    assert clean.report.status == faulty.report.status == "completed"
    assert faulty.report.summary["sessions"]["completed"] == SESSIONS
    want, got = results_by_partition(clean.events), results_by_partition(faulty.events)
    assert len(want) == SESSIONS and all(want.values())
    assert got == want
    completions = Counter(e.session_id for e in faulty.events if e.type == EventType.SESSION_COMPLETED)
    assert set(completions.values()) == {1} and len(completions) == SESSIONS
    # answered calls are counted once: a call lost with its worker was sent again and recorded once
    assert agent_calls(faulty.events) == agent_calls(clean.events)

    # the faults happened, each bad worker exactly three times, and each loss was resumed from the log
    assert len(faults.crash) == 4 and len(faults.hang) == 2
    failed = [e for e in faulty.events if e.type == EventType.ATTEMPT_FAILED]
    assert Counter(e.data["kind"] for e in failed) == {"crash": 12, "hung": 6}
    assert {e.data["worker"] for e in failed} == faults.crash | faults.hang
    assert dict(faults.struck) == dict.fromkeys(faults.crash | faults.hang, 3)
    by_session: dict[str, list[str]] = defaultdict(list)
    for e in faulty.events:
        by_session[e.session_id].append(e.type)
    for sid in {e.session_id for e in failed}:
        types = by_session[sid]
        last_failure = max(i for i, t in enumerate(types) if t == EventType.ATTEMPT_FAILED)
        assert EventType.SESSION_RESUMED in types[last_failure:] or EventType.SESSION_STARTED in types[last_failure:]

    # bad workers left the pool after three consecutive failures; good ones were never charged
    pool = faulty.workforce.pools[-1]
    for wid in workers:
        st = pool.health.stats(wid)
        if wid in faults.crash | faults.hang:
            assert (st.breaker, st.failures, st.consecutive_failures, st.successes) == (BreakerState.OPEN, 3, 3, 0)
        else:
            assert (st.breaker, st.failures) == (BreakerState.CLOSED, 0), wid
    assert pool.statistics().open_breakers == 6

    # no sandbox outlives the run
    assert not (workdir / "sandboxes" / "run-faulty").exists()
    assert list((workdir / "sandboxes").iterdir()) == []
