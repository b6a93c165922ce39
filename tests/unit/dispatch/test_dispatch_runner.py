"""The dispatcher on the worker pool, on a virtual clock over the in-memory session log.

Virtual time only moves when the test says so, and only once every task is blocked where the
scenario puts it (``clock.until_idle()``), so the times asserted here are exact.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from agent_fleet.brain.harness import Harness
from agent_fleet.brain.port import Limits
from agent_fleet.capacity import CapacityFull
from agent_fleet.clock import VirtualClock
from agent_fleet.dispatch.health import BreakerState, HealthConfig
from agent_fleet.dispatch.pool import Lease, WorkerPool, WorkerSpec
from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions
from agent_fleet.dispatch.selection import least_loaded
from agent_fleet.dispatch.slots import LocalSlots
from agent_fleet.domain.events import EventType
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.session import SessionLog
from agent_fleet.session.memory import MemorySessionLog
from agent_fleet.session.port import WakeState
from agent_fleet.session.tap import ForwardingLog
from agent_fleet.spend.port import ModelGateway
from agent_fleet.testing.fakes import FakeGateway, FakeHands, finish_call, tool_call, turn_of
from agent_fleet.testing.faults import WorkerFaults

RUN = "run-disp"


def take(pool: WorkerPool, session_id: str, **criteria: Any) -> Lease | None:
    """A lease now, or None when no worker is free."""
    try:
        return pool.acquire_nowait(session_id, **criteria)
    except CapacityFull:
        return None


async def sessions(log: SessionLog, n: int) -> list[tuple[str, Partition]]:
    out = []
    for i in range(n):
        p = Partition(id=f"p{i:04d}", index=i, kind=InputKind.LIST, items=(f"item {i}",), item_ids=(i,), est_tokens=1)
        sid = session_id_for(RUN, i)
        info = {"run_id": RUN, "index": i, "partition_id": p.id, "partition": p.to_dict(), "task": "t", "model": "m"}
        await log.emit_event(sid, EventType.SESSION_CREATED, {**info, "max_tokens": 100})
        out.append((sid, p))
    return out


def make_pool(clock: VirtualClock, workers: list[str], **health: float) -> WorkerPool:
    pool = WorkerPool(clock, health=HealthConfig(**health))  # type: ignore[arg-type]
    for w in workers:
        pool.register(WorkerSpec(worker_id=w))
    return pool


def dispatcher(
    log: SessionLog, gateway: ModelGateway, clock: VirtualClock, pool: WorkerPool, *, slots: int = 10, **kw: Any
) -> Dispatcher:
    return Dispatcher(
        log=log,
        gateway=gateway,
        brain=Harness,
        hands_for=lambda _p: FakeHands(),
        slots=LocalSlots(slots),
        clock=clock,
        options=DispatchOptions(check_interval=1.0, retry_backoff=1.0),
        pool=pool,
        **kw,
    )


@pytest.fixture
async def log() -> Any:
    store = MemorySessionLog()
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def types_of(log: SessionLog, sid: str) -> list[str]:
    return [e.type for e in await log.get_events(sid)]


async def test_a_crash_moves_the_session_to_a_backup_that_resumes_from_the_log(log: SessionLog) -> None:
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a", "b"])
    faults = WorkerFaults(crash={"a"}, strike_at=(2, 2))  # session_started + model_request land (one append)
    d = dispatcher(log, gw, clock, pool, interpose=faults)
    (sid, p), *_ = await sessions(log, 1)
    outcomes = await d.run([(sid, p)])
    assert outcomes[sid].outcome is Outcome.COMPLETED
    types = await types_of(log, sid)
    assert types == [
        "session_created",
        "session_started",
        "model_request",  # the crash hit the write of its response
        "attempt_failed",
        "model_resent",  # its answer was lost: charged at its reservation before it is sent again
        "session_resumed",
        "model_response",  # the lost call was sent again, recorded once
        "tool_call",
        "result_item",
        "tool_result",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "session_completed",
    ]
    failed = next(e.data for e in await log.get_events(sid) if e.type == EventType.ATTEMPT_FAILED)
    assert (failed["kind"], failed["worker"], failed["attempt"]) == ("crash", "a", 1)
    assert gw.sessions == [sid] * 3
    assert (pool.health.stats("a").failures, pool.health.stats("b").successes) == (1, 1)
    assert (d.stats.completed, d.stats.reassigned, d.stats.attempts_failed) == (1, 1, 1)


async def test_a_hung_worker_is_detected_after_hung_after_and_its_session_moves(log: SessionLog) -> None:
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a", "b"], hung_after=5.0, dead_after=3.0)
    faults = WorkerFaults(hang={"a"}, strike_at=(2, 2))  # session_started lands, then nothing
    d = dispatcher(log, gw, clock, pool, interpose=faults)
    (sid, p), *_ = await sessions(log, 1)
    run = asyncio.create_task(d.run([(sid, p)]))
    await clock.until_idle()
    assert faults.struck["a"] == 1
    moved_at = None
    for _ in range(10):  # one health round per virtual second; the round that finds it charges "a"
        await clock.run_for(1.0)
        if pool.health.stats("a").failures:
            moved_at = clock.now()
            break
    # progress last seen at the first health round (t=1); five seconds without it: hung at t=6
    assert moved_at == 6.0
    outcomes = await run
    assert outcomes[sid].outcome is Outcome.COMPLETED
    failed = [e.data for e in await log.get_events(sid) if e.type == EventType.ATTEMPT_FAILED]
    assert [(f["kind"], f["worker"]) for f in failed] == [("hung", "a")]
    assert pool.health.stats("a").failures == 1 and pool.health.stats("a").breaker is BreakerState.CLOSED
    assert (await types_of(log, sid)).count("session_completed") == 1


class Flaky:
    """An interposer whose workers crash while they are listed in ``bad`` (a worker can heal)."""

    def __init__(self, bad: set[str]) -> None:
        self.bad = bad
        self.inner = WorkerFaults(crash={"a", "b", "c"}, strike_at=(2, 2))

    def __call__(self, lease: Lease, log: SessionLog, gateway: ModelGateway) -> tuple[SessionLog, ModelGateway]:
        if lease.worker_id in self.bad:
            return self.inner(lease, log, gateway)
        return log, gateway


async def test_three_failures_open_the_breaker_and_a_half_open_probe_brings_the_worker_back(log: SessionLog) -> None:
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a"], cooldown=10.0, hung_after=100.0, dead_after=3.0)
    flaky = Flaky({"a"})
    d = dispatcher(log, gw, clock, pool, interpose=flaky)
    (sid, p), *_ = await sessions(log, 1)
    run = asyncio.create_task(d.run([(sid, p)]))
    # three crashes at t=0 open the breaker: the session waits (the fleet degrades, it does not fail)
    await clock.until_idle()
    assert d.stats.waiting_for_worker == 1 and flaky.inner.struck["a"] == 3
    assert pool.health.breaker("a") is BreakerState.OPEN and pool.statistics().admitting == 0
    await clock.run_for(9.0)
    assert flaky.inner.struck["a"] == 3  # still open at t=9
    await clock.run_for(1.0)  # t=10: half-open, one probe; it crashes: open again, cooldown doubled
    await clock.until_idle()
    assert flaky.inner.struck["a"] == 4 and d.stats.waiting_for_worker == 1
    assert pool.health.breaker("a") is BreakerState.OPEN
    flaky.bad.clear()  # the worker heals
    await clock.run_for(19.0)
    assert not run.done() and gw.finished_at == {}
    await clock.run_for(1.0)  # t=30: the probe succeeds, the breaker closes
    outcomes = await run
    assert outcomes[sid].outcome is Outcome.COMPLETED and gw.finished_at == {sid: 30.0}
    st = pool.health.stats("a")
    assert (st.breaker, st.failures, st.successes, st.consecutive_failures) == (BreakerState.CLOSED, 4, 1, 0)
    failed = [e.data["kind"] for e in await log.get_events(sid) if e.type == EventType.ATTEMPT_FAILED]
    assert failed == ["crash"] * 4


async def test_a_depleted_pool_queues_sessions_in_order_instead_of_failing(log: SessionLog) -> None:
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a", "b"])
    started: list[str] = []
    peak = 0

    def watch(lease: Lease, lg: SessionLog, g: ModelGateway) -> tuple[SessionLog, ModelGateway]:
        nonlocal peak
        started.append(lease.session_id)
        peak = max(peak, pool.statistics().load)  # sessions holding a worker, this one included
        return lg, g

    d = dispatcher(log, gw, clock, pool, interpose=watch)
    todo = await sessions(log, 6)
    for sid, _ in todo:
        gw.hold[sid] = asyncio.Event()
    run = asyncio.create_task(d.run(todo))
    await clock.until_idle()
    assert len(started) == 2 and d.stats.waiting_for_worker == 4
    for sid, _ in todo:  # release one at a time: the next waiter in line takes the freed worker
        gw.hold[sid].set()
        await clock.until_idle()
        assert sid in gw.finished_at
    outcomes = await run
    assert all(o.outcome is Outcome.COMPLETED for o in outcomes.values()) and len(outcomes) == 6
    assert started == [sid for sid, _ in todo] and peak == 2
    assert d.stats.waiting_for_worker == 0 and pool.statistics().load == 0


async def test_work_moves_off_a_worker_whose_risk_says_it_is_about_to_fail(log: SessionLog) -> None:
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a", "b"], hung_after=100.0, dead_after=3.0)
    d = dispatcher(log, gw, clock, pool)
    (sid, p), *_ = await sessions(log, 1)
    gw.hold[sid] = asyncio.Event()
    run = asyncio.create_task(d.run([(sid, p)]))
    await clock.until_idle()
    assert gw.sessions == [sid]  # a model call in flight on worker a
    assert pool.load("a") == 1
    # recent failures and a latency trend rising past its baseline: risk above drain_at
    for latency in (1.0, 1.0, 1.0):
        pool.health.record_success("a", latency)
    pool.health.record_failure("a", 10.0)
    pool.health.record_failure("a", 10.0)
    assert pool.health.risk("a") >= pool.health.config.drain_at
    assert pool.health.breaker("a") is BreakerState.CLOSED  # not failed three times: only at risk
    await clock.run_for(1.0)
    await clock.until_idle()
    assert len(gw.calls) == 2  # the call was sent again from worker b
    gw.hold[sid].set()
    outcomes = await run
    assert outcomes[sid].outcome is Outcome.COMPLETED
    failed = [e.data for e in await log.get_events(sid) if e.type == EventType.ATTEMPT_FAILED]
    assert [(f["kind"], f["worker"]) for f in failed] == [("moved", "a")]
    assert pool.health.stats("a").failures == 2  # moving work off it charged nothing more
    assert pool.health.stats("b").successes == 1
    assert [e.type for e in await log.get_events(sid)].count(EventType.MODEL_RESPONSE) == 2


def test_the_idle_index_picks_what_a_full_scan_picks() -> None:
    rng = random.Random(7)
    clock = VirtualClock()
    pool = WorkerPool(clock, health=HealthConfig(cooldown=5.0))
    for i in range(30):
        pool.register(WorkerSpec(worker_id=f"w{i:02d}", max_load=rng.choice([1, 1, 1, 2, 3])))
    leases: list[Lease] = []
    for step in range(3000):
        op = rng.random()
        if op < 0.5:
            exclude = {f"w{rng.randrange(30):02d}"} if rng.random() < 0.3 else set()
            sid = f"s{step}"
            expected = least_loaded(pool._candidates(None, (), exclude))
            got = take(pool, sid, exclude=exclude)
            assert (got.worker_id if got else None) == (expected.worker_id if expected else None), step
            if got is not None:
                leases.append(got)
        elif leases and op < 0.8:
            lease = leases.pop(rng.randrange(len(leases)))
            pool.release(lease, ok=rng.random() < 0.7, latency=rng.random())
        elif leases and op < 0.9:
            lease = leases.pop(rng.randrange(len(leases)))
            moved = pool.fail(lease)
            if moved is not None and moved.lease is not None:
                leases.append(moved.lease)
        else:
            clock.advance(rng.random() * 3)
            for w in pool.workers():
                pool.heartbeat(w)


async def test_the_pool_grows_with_the_queue_and_shrinks_after_a_lull(log: SessionLog) -> None:
    from agent_fleet.dispatch.autoscale import AutoscaleConfig, Autoscaler

    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["w0", "w1"])  # the warm pool
    config = AutoscaleConfig(min_workers=2, max_workers=6, warm=0, step_up=8, step_down=2, down_cooldown=30.0)
    d = dispatcher(log, gw, clock, pool, autoscaler=Autoscaler(clock, config))
    todo = await sessions(log, 10)
    for sid, _ in todo:
        gw.hold[sid] = asyncio.Event()
    run = asyncio.create_task(d.run(todo))
    await clock.until_idle()
    assert len(gw.calls) == 2 and d.stats.waiting_for_worker == 8
    # one monitor round at t=1: demand is 10 sessions, capped at 6 workers — four more start now
    clock.advance(1.0)
    await clock.until_idle()
    assert len(pool.workers()) == 6 and len(gw.calls) == 6
    assert d.stats.waiting_for_worker == 4
    for sid, _ in todo:
        gw.hold[sid].set()
    outcomes = await run
    assert len(outcomes) == 10 and all(o.outcome is Outcome.COMPLETED for o in outcomes.values())
    # idle: the pool keeps its size through the cooldown, then steps down by 2 per decision to the minimum
    assert d.scale() == 0 and len(pool.workers()) == 6
    clock.advance(30.0)
    assert d.scale() == -2 and len(pool.workers()) == 4
    assert d.scale() == 0  # the next step down waits another cooldown
    clock.advance(30.0)
    assert d.scale() == -2 and len(pool.workers()) == 2
    clock.advance(30.0)
    assert d.scale() == 0 and len(pool.workers()) == 2  # never below min_workers


def test_autoscale_settings_from_fleet_yaml() -> None:
    from agent_fleet.config import parse_config
    from agent_fleet.errors import ConfigError

    cfg = parse_config({"dispatch": {"autoscale": {"min_workers": 4, "max_workers": 40, "warm": 3}}})
    assert cfg.dispatch.autoscale is not None and cfg.dispatch.autoscale.max_workers == 40
    assert parse_config({}).dispatch.autoscale is None  # a fixed pool unless asked
    with pytest.raises(ConfigError, match="min_workers"):
        parse_config({"dispatch": {"autoscale": {"min_workers": 9, "max_workers": 3}}})


class Counting(FakeGateway):
    """Counts sessions between waking (their log is read) and their first call, which takes a
    millisecond: other sessions start meanwhile."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock=clock, latency=0.001)
        self.starting: set[str] = set()
        self.most_starting = 0
        self.first_call_seen: set[str] = set()

    def woke(self, session_id: str) -> None:
        self.starting.add(session_id)
        self.most_starting = max(self.most_starting, len(self.starting))

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        if session_id not in self.first_call_seen:
            self.first_call_seen.add(session_id)
            self.starting.discard(session_id)
        return await super().complete(session_id, request)


class WakeWatch(ForwardingLog):
    def __init__(self, inner: SessionLog, counting: Counting) -> None:
        super().__init__(inner)
        self._counting = counting

    async def wake(self, session_id: str) -> WakeState:
        self._counting.woke(session_id)
        return await self.inner.wake(session_id)


async def test_no_more_than_start_ahead_sessions_are_starting_at_once(log: SessionLog) -> None:
    clock = VirtualClock()
    gw = Counting(clock)
    d = Dispatcher(
        log=WakeWatch(log, gw),
        gateway=gw,
        brain=Harness,
        hands_for=lambda _p: FakeHands(),
        slots=LocalSlots(100),
        clock=clock,
        options=DispatchOptions(start_ahead=4),
    )
    work = await sessions(log, 40)
    async with clock.auto_advance():
        outcomes = await d.run(work)
    assert all(o.outcome is Outcome.COMPLETED for o in outcomes.values()) and len(outcomes) == 40
    assert gw.most_starting == 4  # all 40 admitted at once, never more than 4 starting
    assert len(gw.first_call_seen) == 40


async def test_a_session_timeout_runs_on_the_injected_clock(log: SessionLog) -> None:
    """Each attempt is cut at exactly ``session_timeout`` virtual seconds; two of them use up
    ``max_attempts`` and the session fails for good."""
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a", "b"], hung_after=1000.0, dead_after=1000.0)
    starts: list[tuple[str, float]] = []

    def watch(lease: Lease, lg: SessionLog, g: ModelGateway) -> tuple[SessionLog, ModelGateway]:
        starts.append((lease.worker_id, clock.now()))
        return lg, g

    d = Dispatcher(
        log=log,
        gateway=gw,
        brain=Harness,
        hands_for=lambda _p: FakeHands(),
        slots=LocalSlots(1),
        clock=clock,
        options=DispatchOptions(session_timeout=30.0, max_attempts=2),
        pool=pool,
        interpose=watch,
    )
    (sid, p), *_ = await sessions(log, 1)
    gw.hold[sid] = asyncio.Event()  # the model never answers
    async with clock.auto_advance():
        outcomes = await d.run([(sid, p)])
    assert outcomes[sid].outcome is Outcome.FAILED
    assert starts == [("a", 0.0), ("b", 30.0)]  # the timed-out worker is avoided for the retry
    failed = [e.data for e in await log.get_events(sid) if e.type == EventType.ATTEMPT_FAILED]
    assert [(f["kind"], f["error"]) for f in failed] == [("timeout", "timed out after 30.0 s")] * 2
    assert gw.sessions == [sid, sid]


_BUILT: list[tuple[object, object, int]] = []  # (log, gateway, max_turns) of every brain built


class _RecordingBrain:
    """A brain that completes at once, remembering what each attempt was built over."""

    def __init__(self, *, log: SessionLog, gateway: ModelGateway, hands: object, limits: Limits) -> None:
        self._log = log
        _BUILT.append((log, gateway, limits.max_turns))

    async def run(self, session_id: str, *, attempt: int = 1) -> SessionOutcome:
        await self._log.emit_event(session_id, EventType.SESSION_COMPLETED, {"summary": f"attempt {attempt}"})
        return SessionOutcome(session_id, Outcome.COMPLETED)


async def test_the_dispatcher_runs_the_brain_it_is_given_over_each_attempts_own_views(log: SessionLog) -> None:
    _BUILT.clear()
    clock = VirtualClock()
    gw = Counting(clock)
    d = Dispatcher(
        log=log,
        gateway=gw,
        brain=_RecordingBrain,
        hands_for=lambda _p: FakeHands(),
        slots=LocalSlots(10),
        clock=clock,
        options=DispatchOptions(limits=Limits(max_turns=7)),
    )
    outcomes = await d.run(await sessions(log, 3))
    assert {o.outcome for o in outcomes.values()} == {Outcome.COMPLETED} and len(outcomes) == 3
    assert len(_BUILT) == 3
    for att_log, att_gateway, max_turns in _BUILT:
        assert att_log is not log and att_gateway is not gw  # the attempt's watched views, not the engine's
        assert max_turns == 7


def test_a_dispatcher_needs_a_brain_or_a_session_body() -> None:
    with pytest.raises(TypeError, match="brain"):
        Dispatcher(log=None, gateway=None, hands_for=lambda _p: FakeHands(), slots=LocalSlots(1))  # type: ignore[arg-type]


async def test_a_preemption_during_a_model_call_stops_at_the_turn_boundary(log: SessionLog) -> None:
    """The call in flight is answered and recorded (the provider bills it whatever the client does),
    then the attempt stops; the next attempt goes on from the log without sending that call again.
    A call cancelled instead would leave its place under the gateway's cap while the provider still
    works on it, and be charged again as ``model_resent``."""
    clock = VirtualClock()
    gw = FakeGateway(clock=clock)
    pool = make_pool(clock, ["a"])
    d = dispatcher(log, gw, clock, pool, slots=1)
    (sid, p), *_ = await sessions(log, 1)
    held = gw.hold[sid] = asyncio.Event()

    async def preempt_mid_call() -> None:
        while not gw.calls:
            await asyncio.sleep(0)
        d.preempt(sid, "InCohortReclamation", "run-b.s00000")
        await asyncio.sleep(0)
        del gw.hold[sid]
        held.set()

    async with asyncio.TaskGroup() as tg:
        tg.create_task(preempt_mid_call())
        outcomes = await d.run([(sid, p)])
    assert outcomes[sid].outcome is Outcome.COMPLETED
    assert await types_of(log, sid) == [
        "session_created",
        "session_started",
        "model_request",
        "model_response",  # answered while the preemption waited for it
        "session_preempted",
        "session_resumed",
        "tool_call",
        "result_item",
        "tool_result",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "session_completed",
    ]
    preempted = next(e.data for e in await log.get_events(sid) if e.type == EventType.SESSION_PREEMPTED)
    assert preempted == {"reason": "InCohortReclamation", "by": "run-b.s00000"}
    assert gw.sessions == [sid, sid]  # two calls in all: none sent twice
    assert (d.stats.preempted, d.stats.completed, d.stats.attempts_failed) == (1, 1, 0)


async def test_a_preemption_between_model_calls_stops_the_attempt_at_once(log: SessionLog) -> None:
    """No call in flight (here: inside an hour-long tool call): the attempt is cancelled there and then."""
    clock = VirtualClock()
    started = asyncio.Event()
    runs: list[str] = []

    def script(session_id: str, request: ChatRequest) -> ChatResponse:
        if turn_of(request) == 1:
            return ChatResponse(None, (tool_call("wait", {}, "w-1"),), Usage(10, 5))
        return finish_call(session_id)

    async def wait(_input: dict[str, Any]) -> str:
        runs.append("wait")
        if len(runs) == 1:
            started.set()
            await asyncio.sleep(3600)  # the first attempt's tool call would run for an hour
        return "done"

    gw = FakeGateway(script, clock=clock)
    pool = make_pool(clock, ["a"])
    d = Dispatcher(
        log=log,
        gateway=gw,
        brain=Harness,
        hands_for=lambda _p: FakeHands({"wait": wait}),
        slots=LocalSlots(1),
        clock=clock,
        options=DispatchOptions(check_interval=1.0, retry_backoff=1.0),
        pool=pool,
    )
    (sid, p), *_ = await sessions(log, 1)

    async def preempt_in_tool() -> None:
        await started.wait()
        d.preempt(sid, "Preempted", None)

    async with asyncio.timeout(10), asyncio.TaskGroup() as tg:
        tg.create_task(preempt_in_tool())
        outcomes = await d.run([(sid, p)])
    assert outcomes[sid].outcome is Outcome.COMPLETED
    types = await types_of(log, sid)
    assert types[:6] == [
        "session_created",
        "session_started",
        "model_request",
        "model_response",
        "tool_call",
        "session_preempted",  # cut inside the tool call, not an hour later
    ]
    assert types[-1] == "session_completed"
    assert runs == ["wait", "wait"] and d.stats.preempted == 1
