"""WatchedLog: an attempt cancelled while its write is in flight leaves nothing behind unawaited —
``settle()`` returns only once the write has landed — over a store whose appends are futures
(SQLite, with its writer held back) and over one whose appends are coroutines (the in-memory log)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agent_fleet.dispatch.watch import Progress, WatchedLog
from agent_fleet.domain.events import Event
from agent_fleet.session import SessionLog
from agent_fleet.session.memory import MemorySessionLog
from agent_fleet.session.sqlite import SqliteSessionLog


class _HeldSqlite(SqliteSessionLog):
    """A SQLite log whose writer commits nothing until ``release`` is set."""

    release = threading.Event()

    def _write_pending(self) -> bool:
        self.release.wait(30)
        return super()._write_pending()


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionLog:
    _HeldSqlite.release = threading.Event()
    log: SessionLog = _HeldSqlite(tmp_path / "fleet.db") if request.param == "sqlite" else MemorySessionLog()
    await log.open()
    return log


async def test_a_cancelled_attempts_write_is_settled_once_it_lands(store: SessionLog) -> None:
    progress = Progress()
    watched = WatchedLog(store, progress)

    async def attempt() -> Event:
        return await watched.emit_event("run-w.s1", "session_created", {"run_id": "run-w"})

    task = asyncio.create_task(attempt())
    await asyncio.sleep(0)  # the write is asked for
    assert progress.waiting == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (progress.waiting, progress.writes) == (0, 0)
    settling = asyncio.create_task(watched.settle())
    await asyncio.sleep(0.05)
    if isinstance(store, _HeldSqlite):
        assert not settling.done()  # the write has not landed: settle waits for it
        _HeldSqlite.release.set()
    await asyncio.wait_for(settling, 10)
    assert [e.seq for e in await store.get_events("run-w.s1")] == [1]
    await store.close()


async def test_a_write_counts_as_progress_and_returns_its_event(store: SessionLog) -> None:
    _HeldSqlite.release.set()
    progress = Progress()
    watched = WatchedLog(store, progress)
    first = await watched.emit_event("run-w.s2", "session_created", {"run_id": "run-w"})
    rest = await watched.emit_events("run-w.s2", [("note", {}), ("note", {})])
    assert (first.seq, [e.seq for e in rest]) == (1, [2, 3])
    assert (progress.writes, progress.waiting) == (2, 0)
    await watched.settle()
    await store.close()
