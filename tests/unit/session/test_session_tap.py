"""TappedLog: the listener hears every event once it is durable, over a store whose appends are
futures and over one whose appends are coroutines (the in-memory log)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest

from agent_fleet.domain.events import Event
from agent_fleet.session import SessionLog
from agent_fleet.session.tap import TappedLog

OpenLog = Callable[[], Awaitable[SessionLog]]


async def test_the_listener_hears_each_append_once_durable(open_log: OpenLog) -> None:
    inner = await open_log()
    heard: list[tuple[str, int]] = []

    def listener(events: Sequence[Event]) -> None:
        heard.extend((e.session_id, e.seq) for e in events)

    log = TappedLog(inner, listener)
    one = await log.emit_event("run-t.s1", "session_created", {"run_id": "run-t"})
    many = await log.emit_events("run-t.s1", [("note", {}), ("note", {})])
    assert (one.seq, [e.seq for e in many]) == (1, [2, 3])
    assert heard == [("run-t.s1", 1), ("run-t.s1", 2), ("run-t.s1", 3)]


async def test_a_listener_that_raises_fails_the_append(open_log: OpenLog) -> None:
    inner = await open_log()

    def listener(events: Sequence[Event]) -> None:
        raise RuntimeError(f"listener broke on {events[0].seq}")

    log = TappedLog(inner, listener)
    with pytest.raises(RuntimeError, match="broke on 1"):
        await log.emit_event("s", "x")
    with pytest.raises(RuntimeError, match="broke on 2"):
        await log.emit_events("s", [("y", {})])
    assert [e.seq for e in await inner.get_events("s")] == [1, 2]  # durable all the same


async def test_a_caller_that_stops_waiting_is_not_heard(open_log: OpenLog) -> None:
    inner: SessionLog = await open_log()
    heard: list[Event] = []
    log = TappedLog(inner, heard.extend)

    async def append() -> Event:
        return await log.emit_event("s", "x")

    task = asyncio.create_task(append())
    await asyncio.sleep(0)  # asked for, not yet acknowledged
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    later = await log.emit_event("s", "y")
    assert [e.seq for e in heard] == [later.seq]
