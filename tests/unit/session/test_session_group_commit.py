"""Group commit in both stores: what one turn of the event loop appends is committed as one batch,
a batch holds at most ``max_batch_events`` events, and a request whose content cannot be stored
fails alone while its batch-mates are written.

Every batch stamps its events with one reading of the store's wall clock; the tests give the store
a clock that counts readings, so each event's time names the batch that committed it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent_fleet.errors import StoreError
from agent_fleet.session.sqlite import SqliteSessionLog

if TYPE_CHECKING:
    from agent_fleet.session.postgres import PostgresSessionLog

MakeLog = Callable[[int], "SqliteSessionLog | PostgresSessionLog"]


@pytest.fixture
def make_log(store_url: str) -> MakeLog:
    """Builds a log on the test's store whose wall clock reads 1.0, 2.0, ... (one reading per batch)."""
    if not store_url.startswith(("sqlite:", "postgres")):
        pytest.skip("the in-memory log has no writer: each call is written at once")

    def make(max_batch_events: int) -> SqliteSessionLog | PostgresSessionLog:
        clock = map(float, itertools.count(1)).__next__
        if store_url.startswith("sqlite:"):
            path = store_url.removeprefix("sqlite:///")
            return SqliteSessionLog(path, max_batch_events=max_batch_events, wall_clock=clock)
        from agent_fleet.session.postgres import PostgresSessionLog

        dsn, _, schema = store_url.partition("?schema=")
        return PostgresSessionLog(dsn, schema=schema, max_batch_events=max_batch_events, wall_clock=clock)

    return make


async def test_the_appends_of_one_turn_are_one_batch(make_log: MakeLog) -> None:
    async with make_log(5_000) as log:
        first = await asyncio.gather(*(log.emit_event(f"run-a.s{i:03d}", "session_created") for i in range(200)))
        second = await asyncio.gather(*(log.emit_event(f"run-a.s{i:03d}", "note", {"i": i}) for i in range(200)))
    assert {e.time for e in first} == {1.0}
    assert {e.time for e in second} == {2.0}
    assert [e.seq for e in second] == [2] * 200


async def test_a_batch_holds_at_most_max_batch_events(make_log: MakeLog) -> None:
    async with make_log(3) as log:
        acked = await asyncio.gather(
            log.emit_event("run-b", "run_created"),
            log.emit_events("run-b", [("note", {"i": 1}), ("note", {"i": 2})]),
            log.emit_event("run-b.s001", "session_created"),
            log.emit_events("run-b.s002", [("session_created", {}), ("note", {})]),
            log.emit_event("run-b.s003", "session_created"),
        )
        stored = await log.get_events("run-b")
    # 1 + 2 events fill the first batch of 3, the next 1 + 2 the second, the last event goes alone.
    first, notes, one, two, last = acked
    times = [[e.time for e in events] for events in ([first], notes, [one], two, [last])]  # type: ignore[list-item]
    assert times == [[1.0], [1.0, 1.0], [2.0], [2.0, 2.0], [3.0]]
    assert [(e.seq, e.time) for e in stored] == [(1, 1.0), (2, 1.0), (3, 1.0)]


async def test_a_request_that_cannot_be_stored_fails_alone(make_log: MakeLog) -> None:
    async with make_log(5_000) as log:
        results = await asyncio.gather(
            log.emit_event("run-c.s001", "session_created"),
            log.emit_event("run-c.s002", "session_created", {"bad": "\ud800"}),  # a lone surrogate: not UTF-8
            log.emit_event("run-c.s003", "session_created"),
            return_exceptions=True,
        )
        assert isinstance(results[1], StoreError)
        assert [r.seq for r in (results[0], results[2])] == [1, 1]  # type: ignore[union-attr]
        assert await log.get_session("run-c.s002") is None
        assert [e.seq for e in await log.get_events("run-c.s003")] == [1]


async def test_a_loop_in_another_thread_appends_and_puts_snapshots(tmp_path: Path) -> None:
    """The SQLite log is opened on one loop; a loop in another thread gets its acknowledgements."""
    async with SqliteSessionLog(tmp_path / "fleet.db") as log:
        await log.emit_event("run-x", "run_created")

        async def elsewhere() -> int:
            event = await log.emit_event("run-x", "note", {"from": "thread"})
            await log.put_snapshot("k", {"v": 1})
            return event.seq

        seq = await asyncio.wait_for(asyncio.to_thread(asyncio.run, elsewhere()), 30)
        assert seq == 2
        assert await log.get_snapshot("k") == {"v": 1}
        assert [e.seq for e in await log.get_events("run-x")] == [1, 2]
