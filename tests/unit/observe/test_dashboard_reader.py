"""FleetReader over a session log: incremental reads on the virtual clock, the overview, the spend canary."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from dashboard_builders import answer, create_run, store_metrics
from prometheus_client.parser import text_string_to_metric_families

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.events import EventType
from agent_fleet.observe.dashboard import FleetReader, ReaderOptions, exposition, overview, run_detail, team_of
from agent_fleet.session.memory import MemorySessionLog


class CountingLog(MemorySessionLog):
    """Counts the event reads, to show the reader only reads what moved."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get_events(self, session_id: str, after: int = 0) -> list:  # type: ignore[type-arg]
        self.reads.append(session_id)
        return await super().get_events(session_id, after)


@pytest.fixture
async def log() -> AsyncIterator[CountingLog]:
    log = CountingLog()
    await log.open()
    yield log
    await log.close()


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text.decode())
        for s in f.samples
    }


async def test_refresh_reads_at_most_once_per_interval_and_only_what_moved(log: CountingLog) -> None:
    clock = VirtualClock(1000.0)
    sids = await create_run(log, "run-a", 3)
    reader = FleetReader(log, clock=clock, options=ReaderOptions(interval=0.5))
    await reader.refresh()
    assert sorted(reader.runs["run-a"].sessions) == sids
    log.reads.clear()
    await answer(log, sids[1], tokens=(100, 20), usd="0.002")
    clock.advance(0.4)
    await reader.refresh()  # within the interval: nothing read
    assert log.reads == []
    clock.advance(0.1)
    await reader.refresh()
    # the live run's own stream and the one session that moved; the other two are not read again
    assert log.reads == ["run-a", sids[1]]
    assert reader.runs["run-a"].sessions[sids[1]].tokens == 120
    assert [p.t for p in reader.history] == [1000.0, 1000.5]


async def test_overview_counts_rates_and_queues(log: CountingLog) -> None:
    clock = VirtualClock(0.0)
    forecast = {"cost_usd": {"low": "0.01", "high": "0.03"}}
    sids = await create_run(log, "run-a", 4, options={"queue": "team-a/main"}, forecast=forecast)
    reader = FleetReader(
        log, clock=clock, wall_clock=lambda: 1_700_000_000 + clock.now(), options=ReaderOptions(interval=1.0)
    )
    await reader.refresh()
    for sid in sids[:2]:
        await log.emit_event(sid, EventType.SESSION_STARTED, {})
        await answer(log, sid, tokens=(400, 100), usd="0.005", retried=1)
    await store_metrics(log, "run-a", limit=12, in_flight=2, raw=10, unique=8)
    clock.advance(2.0)
    await reader.refresh()
    o = overview(reader)
    assert o["active_agents"] == 2
    assert o["tokens_total"] == 1000
    assert o["tokens_per_s"] == 500.0  # 1000 tokens in the 2 s between the two reads
    assert o["error_rate"] == 0.5  # 2 retried errors beside 2 answered calls
    assert o["dedup_rate"] == 0.2
    assert o["cost_usd"] == pytest.approx(0.01)
    assert o["forecast_usd"] == {"low": 0.01, "high": 0.03}
    assert (o["concurrency_limit"], o["in_flight"]) == (12, 2)
    assert [p["limit"] for p in o["series"]] == [0, 12]
    assert [p["t"] for p in o["series"]] == [1_700_000_000, 1_700_000_002]  # wall-clock times for the page
    assert [p["limit"] for p in overview(reader, series=False)["series"]] == [12]
    run = o["runs"][0]
    assert (run["team"], run["queue"], run["sessions"]) == ("team-a", "team-a/main", {"running": 2, "created": 2})
    detail = run_detail(reader, "run-a")
    assert detail is not None
    assert [s["session_id"] for s in detail["session_rows"]] == sids
    assert run_detail(reader, "nope") is None


async def test_spend_canary_top_k_and_near_budget_per_team(log: CountingLog) -> None:
    clock = VirtualClock(0.0)
    a = await create_run(log, "run-a", 3, options={"team": "alpha", "budget_tokens": 1000})
    b = await create_run(log, "run-b", 2, options={"team": "beta", "budget_tokens": 2000})
    await answer(log, a[0], tokens=(850, 50), usd="0")  # 0.9
    await answer(log, a[1], tokens=(700, 100), usd="0")  # 0.8: at the threshold counts
    await answer(log, a[2], tokens=(100, 0), usd="0")  # 0.1
    await answer(log, b[0], tokens=(1900, 0), usd="0")  # 0.95, but it completed: not live
    await log.emit_event(b[0], EventType.SESSION_COMPLETED, {})
    await answer(log, b[1], tokens=(1000, 0), usd="0")  # 0.5
    await log.emit_event("run-b", EventType.BUDGET_RAISED, {"tokens": 4000})  # run-wide: 0.25
    reader = FleetReader(log, clock=clock, options=ReaderOptions(near_budget=0.8, top_k=2))
    await reader.refresh()
    samples = _samples(exposition(reader))
    ratios = {k[1]: v for k, v in samples.items() if k[0] == "fleet_session_budget_used_ratio"}
    assert ratios == {
        (("run", "run-a"), ("session", a[0]), ("team", "alpha")): 0.9,
        (("run", "run-a"), ("session", a[1]), ("team", "alpha")): 0.8,
    }
    near = {k[1]: v for k, v in samples.items() if k[0] == "fleet_sessions_near_budget"}
    assert near == {(("team", "alpha"),): 2.0, (("team", "beta"),): 0.0}
    assert samples[("fleet_team_tokens_total", (("team", "beta"),))] == 2900
    assert (
        samples[("fleet_run_info", (("queue", "default"), ("run", "run-b"), ("state", "running"), ("team", "beta")))]
        == 1
    )
    assert [s["session_id"] for s in overview(reader)["near_budget"]["sessions"]] == [a[0], a[1]]


async def test_one_gateway_is_one_cap_and_an_ended_run_exports_no_gauge(log: CountingLog) -> None:
    clock = VirtualClock(0.0)
    for run in ("run-a", "run-b", "run-c"):
        await create_run(log, run, 1)
        await log.emit_event(run, EventType.RUN_RESUMED, {})  # live
    # run-a and run-b are two runs of one server: they store its one gateway's cap; run-c has its own
    await store_metrics(log, "run-a", limit=30, in_flight=4, gateway="serve-1")
    await store_metrics(log, "run-b", limit=30, in_flight=4, gateway="serve-1")
    await store_metrics(log, "run-c", limit=8, in_flight=1, gateway="deploy-c")
    reader = FleetReader(log, clock=clock)
    await reader.refresh()
    assert (overview(reader)["concurrency_limit"], overview(reader)["in_flight"]) == (38, 5)  # 30 once, plus 8
    await log.emit_event("run-c", EventType.RUN_COMPLETED, {"summary": {}})
    clock.advance(1.0)
    await reader.refresh()
    samples = _samples(exposition(reader))
    assert overview(reader)["concurrency_limit"] == 30
    assert ("fleet_api_concurrency_limit", (("run", "run-c"),)) not in samples  # ended: no gauge
    assert ("fleet_sessions", (("run", "run-c"), ("state", "active"))) not in samples
    assert samples[("fleet_llm_requests_total", (("model", "m1"), ("outcome", "ok"), ("run", "run-c")))] == 1
    assert samples[("fleet_api_concurrency_limit", (("run", "run-a"),))] == 30


def test_team_of_a_run() -> None:
    assert team_of({"team": "alpha", "queue": "x/y"}) == "alpha"
    assert team_of({"queue": "team-b/main"}) == "team-b"
    assert team_of({"queue": "main"}) == "main"
    assert team_of({}) == "default"


async def test_the_checks_panel_counts_outcomes_and_the_admission_wait(log: CountingLog) -> None:
    sids = await create_run(log, "run-c", 4, options={"check": "pytest -q"})
    recorded = [("passed", 0.0), ("passed", 2.0), ("failed", 4.0)]
    for sid, (outcome, wait) in zip(sids, recorded, strict=False):
        data = {"change_seq": 2, "outcome": outcome, "duration_s": 1.5, "output_tail": "", "wait_s": wait}
        await log.emit_event(sid, EventType.CHECK, data)
    reader = FleetReader(log, clock=VirtualClock(0.0))
    await reader.refresh()
    shown = overview(reader)["checks"]
    assert shown["outcomes"] == {"passed": 2, "failed": 1, "timeout": 0, "skipped": 0}
    assert 4.0 <= shown["wait_p95_s"] <= 5.0  # inside the (1, 5] bucket the longest wait fell in
    detail = run_detail(reader, "run-c")
    assert detail is not None and detail["checks"]["outcomes"]["failed"] == 1
    assert [row["check"] for row in detail["session_rows"]] == ["passed", "passed", "failed", None]
