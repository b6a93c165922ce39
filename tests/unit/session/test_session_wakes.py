"""Batched wakes: every read is run by one of its callers, never by a task left behind."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agent_fleet.domain.events import SessionRecord, SessionState
from agent_fleet.errors import SessionNotFound, StoreError
from agent_fleet.session._wakes import WakeBatcher
from agent_fleet.session.port import WakeState


def state(sid: str) -> WakeState:
    return WakeState(SessionRecord(sid, "agent", "run", SessionState.RUNNING, 0, 0.0, 0.0), ())


class Reads:
    """A backend's read_many whose reads finish when the test says so."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []
        self.gates: list[asyncio.Event] = []
        self.fail: BaseException | None = None

    async def __call__(self, ids: Sequence[str]) -> dict[str, WakeState]:
        self.asked.append(list(ids))
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        if self.fail is not None:
            raise self.fail
        return {sid: state(sid) for sid in ids if not sid.startswith("missing")}


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_reads_run_inside_the_callers_and_the_next_batch_waits_for_the_first() -> None:
    reads = Reads()
    batcher = WakeBatcher(reads)
    before = len(asyncio.all_tasks())
    first = [asyncio.ensure_future(batcher.wake(s)) for s in ("a", "b", "missing-c")]
    await turns()
    assert reads.asked == [["a", "b", "missing-c"]]
    assert len(asyncio.all_tasks()) == before + 3  # the three callers, no reader of its own
    later = asyncio.ensure_future(batcher.wake("d"))
    await turns()
    assert reads.asked == [["a", "b", "missing-c"]]  # one read at a time
    reads.gates[0].set()
    await turns()
    assert [f.result().session.session_id for f in first[:2]] == ["a", "b"]
    assert isinstance(first[2].exception(), SessionNotFound)
    assert reads.asked[1] == ["d"]  # "d" leads the next read itself
    reads.gates[1].set()
    assert (await later).session.session_id == "d"
    assert repr(batcher) == "WakeBatcher(leading=False, waiting=0)"


async def test_a_cancelled_leader_hands_its_unanswered_batch_to_a_waiter() -> None:
    reads = Reads()
    batcher = WakeBatcher(reads)
    leader = asyncio.ensure_future(batcher.wake("a"))
    other = asyncio.ensure_future(batcher.wake("b"))
    await turns()
    assert reads.asked == [["a", "b"]]
    leader.cancel()
    await turns()
    assert leader.cancelled()
    assert reads.asked[1] == ["b"]  # read again, led by "b"
    reads.gates[1].set()
    assert (await other).session.session_id == "b"


async def test_a_failed_read_fails_every_waiter_with_its_own_error() -> None:
    reads = Reads()
    reads.fail = StoreError("the store went away")
    batcher = WakeBatcher(reads)
    waits = [asyncio.ensure_future(batcher.wake(s)) for s in ("a", "b", "c")]
    await turns()
    reads.gates[0].set()
    errors = await asyncio.gather(*waits, return_exceptions=True)
    assert all(isinstance(e, StoreError) and str(e) == "the store went away" for e in errors)
    assert len({id(e) for e in errors}) == 3
    reads.fail = None
    again = asyncio.ensure_future(batcher.wake("a"))  # the batcher is usable afterwards
    await turns()
    reads.gates[-1].set()
    assert (await again).session.session_id == "a"


async def test_a_waiter_cancelled_while_chosen_to_lead_passes_the_lead_on() -> None:
    reads = Reads()
    batcher = WakeBatcher(reads)
    leader = asyncio.ensure_future(batcher.wake("a"))
    await turns()
    chosen = asyncio.ensure_future(batcher.wake("b"))
    last = asyncio.ensure_future(batcher.wake("c"))
    await turns()
    reads.gates[0].set()
    await asyncio.sleep(0)  # the read answered; "b" is told to lead but has not run yet
    chosen.cancel()
    await turns()
    assert (await leader).session.session_id == "a"
    with pytest.raises(asyncio.CancelledError):
        await chosen
    assert reads.asked[-1] == ["b", "c"]
    reads.gates[-1].set()
    assert (await last).session.session_id == "c"
