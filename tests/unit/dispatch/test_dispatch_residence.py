"""Woken sessions are bounded: a session waiting for the gateway is kept by the log, not by a harness.

On a virtual clock over the in-memory log: every session is admitted at once; at most ``resident`` of
them have a harness rebuilt from their log at any time, the others wait before waking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from agent_fleet.brain.harness import Harness
from agent_fleet.clock import VirtualClock
from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions
from agent_fleet.dispatch.slots import LocalSlots
from agent_fleet.dispatch.starts import RESIDENT_MIN, RESIDENT_PER_CALL, Residence, resident_places
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.outcomes import Outcome
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.session.memory import MemorySessionLog
from agent_fleet.session.port import SessionLog, WakeState
from agent_fleet.session.tap import ForwardingLog
from agent_fleet.testing.fakes import FakeGateway, FakeHands

RUN = "run-res"


class Woken(ForwardingLog):
    """Counts sessions between waking (their log is read) and their end (completed or preempted)."""

    def __init__(self, inner: SessionLog) -> None:
        super().__init__(inner)
        self.woken: set[str] = set()
        self.most = 0
        self.wakes: list[str] = []

    async def wake(self, session_id: str) -> WakeState:
        self.woken.add(session_id)
        self.wakes.append(session_id)
        self.most = max(self.most, len(self.woken))
        return await self.inner.wake(session_id)

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        out = await self.inner.emit_events(session_id, events)
        if any(t == EventType.SESSION_COMPLETED for t, _ in events):
            self.woken.discard(session_id)
        return out

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        out = await self.inner.emit_event(session_id, type, data)
        if type in (EventType.SESSION_COMPLETED, EventType.SESSION_PREEMPTED):
            self.woken.discard(session_id)
        return out


async def sessions(log: SessionLog, n: int) -> list[tuple[str, Partition]]:
    out = []
    for i in range(n):
        p = Partition(id=f"p{i:04d}", index=i, kind=InputKind.LIST, items=(f"item {i}",), item_ids=(i,), est_tokens=1)
        sid = session_id_for(RUN, i)
        info = {"run_id": RUN, "index": i, "partition_id": p.id, "partition": p.to_dict(), "task": "t", "model": "m"}
        await log.emit_event(sid, EventType.SESSION_CREATED, {**info, "max_tokens": 100})
        out.append((sid, p))
    return out


@pytest.fixture
async def log() -> Any:
    store = MemorySessionLog()
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def _dispatcher(log: SessionLog, clock: VirtualClock, resident: int | None) -> Dispatcher:
    return Dispatcher(
        log=log,
        gateway=FakeGateway(clock=clock, latency=0.5),  # submit, then finish: two calls a session
        brain=Harness,
        hands_for=lambda _p: FakeHands(),
        slots=LocalSlots(100),
        clock=clock,
        options=DispatchOptions(resident=resident),
    )


@pytest.mark.parametrize(("resident", "most"), [(3, 3), (None, 20)])
async def test_no_more_than_resident_sessions_are_woken_at_once(
    log: SessionLog, resident: int | None, most: int
) -> None:
    clock = VirtualClock()
    woken = Woken(log)
    d = _dispatcher(woken, clock, resident)
    work = await sessions(log, 20)
    async with clock.auto_advance():
        outcomes = await d.run(work)
    assert len(outcomes) == 20 and all(o.outcome is Outcome.COMPLETED for o in outcomes.values())
    assert woken.most == most  # all 20 admitted at once
    assert sorted(woken.wakes) == [sid for sid, _ in work]  # each woken once: none lost its place mid-way
    if resident is not None:
        assert woken.wakes == [sid for sid, _ in work]  # in the order they came


async def test_a_session_waiting_for_a_resident_place_is_preempted_without_waking(log: SessionLog) -> None:
    clock = VirtualClock()
    woken = Woken(log)
    d = _dispatcher(woken, clock, 1)
    (first, p1), (second, p2) = await sessions(log, 2)

    async def preempt_the_waiting_one() -> None:
        while first not in woken.woken:
            await asyncio.sleep(0)
        d.preempt(second, "Preempted", None)

    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(preempt_the_waiting_one())
        outcomes = await d.run([(first, p1), (second, p2)])
    assert outcomes[first].outcome is Outcome.COMPLETED and outcomes[second].outcome is Outcome.COMPLETED
    types = [e.type for e in await log.get_events(second)]
    assert types[:2] == ["session_created", "session_preempted"]  # never woken before it was preempted
    assert types[-1] == "session_completed" and d.stats.preempted == 1


def test_resident_places_follow_the_gateways_concurrency() -> None:
    assert resident_places(50) == RESIDENT_PER_CALL * 50
    assert resident_places(1) == RESIDENT_MIN
    with pytest.raises(ValueError, match="resident places"):
        Residence(0)
