"""The embedded session log: one SQLite file in WAL mode, written by one thread with group commit.

Durability. The database runs in WAL mode. A commit appends the transaction's pages to the
``-wal`` file with ``write()`` before ``COMMIT`` returns, so once an event is acknowledged its
bytes belong to the operating system, not to this process: ``kill -9`` cannot take them back,
and the next opener replays the WAL. That is why ``synchronous=NORMAL`` (no ``fsync`` per
commit; the WAL is synced at checkpoints) is enough for the guarantee the port makes —
an acknowledged event survives the death of the process. Surviving *power loss or an OS
crash* is a stronger guarantee that needs an ``fsync`` of the WAL on every commit: ask for it
with ``?sync=full`` in the store URL (group commit then shares each ``fsync`` among every
event of the batch). In both modes the database is never corrupted, only the newest
unsynced transactions can be lost to a power cut under ``NORMAL``.

Group commit. Callers' appends are handed to one writer thread, with its own connection, a turn
of the event loop at a time (:mod:`agent_fleet.session._writes`); it commits everything it was
handed in one ``BEGIN IMMEDIATE`` transaction, a few multi-row statements per table
(:mod:`agent_fleet.session._sqlite_batch`), and only then resolves the futures (one hop to the
event loop per batch). While a batch commits the next one accumulates, so batches grow with load
and no timer is needed. Reads use a second connection; WAL readers never block the writer.

Checkpoints stay SQLite's own (in the writer, every ~1,000 WAL pages). Moving them to a
background thread was measured: no faster on a 2-core host, and a checkpoint running beside a
busy writer never catches up with it, so the WAL is never rewound and grew past 700 MB.

Other processes. Another process may open the same file and append (``agent-fleet budget
raise`` while a run is live): the writer keeps each session's last ``seq`` in a cache, but
checks ``PRAGMA data_version`` inside every write transaction and drops the cache when another
connection has committed since, so ``seq`` stays unique and gap-free. ``busy_timeout`` lets
the two writers take turns.

Opening the file (the connection pragmas, the schema, the refusal of a file holding other
applications' tables) is :mod:`agent_fleet.session._sqlite_connect`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agent_fleet.domain.events import Event, SessionRecord
from agent_fleet.errors import StoreError, StoreUnreachable
from agent_fleet.session._codec import AppendRequest, Outcome, SnapshotRequest, decode_data, resolve_futures
from agent_fleet.session._retry import DEFAULT_DEADLINE_S, RetryPolicy
from agent_fleet.session._sqlite_batch import SeqCache, write_batch
from agent_fleet.session._sqlite_connect import SCHEMA_VERSION as SCHEMA_VERSION
from agent_fleet.session._sqlite_connect import SYNC_MODES, check_foreign_tables, connect, create_schema
from agent_fleet.session._sqlite_lease import read_lease, swap_lease
from agent_fleet.session._sqlite_rows import SESSION_COLUMNS as _SESSION_COLUMNS
from agent_fleet.session._sqlite_rows import SESSIONS as _SESSIONS
from agent_fleet.session._sqlite_rows import as_store_error as _as_store_error
from agent_fleet.session._sqlite_rows import events as _events
from agent_fleet.session._sqlite_rows import record as _record
from agent_fleet.session._sqlite_rows import request_specific as _request_specific
from agent_fleet.session._sqlite_rows import transient as _transient
from agent_fleet.session._sqlite_rows import wake_many as _wake_many
from agent_fleet.session._wakes import WakeBatcher
from agent_fleet.session._writes import Batch, Lifecycle, QueuedWrites
from agent_fleet.session.lease import Lease
from agent_fleet.session.port import WakeState

__all__ = ["SqliteSessionLog"]

_T = TypeVar("_T")

_SELECT_SESSION = f"SELECT {_SESSION_COLUMNS} FROM {_SESSIONS} WHERE s.session_id = ?"
_SELECT_EVENTS = (
    "SELECT session_id, seq, type, time, data FROM fleet_events WHERE session_id = ? AND seq > ? ORDER BY seq"
)


class SqliteSessionLog(QueuedWrites):
    """:class:`~agent_fleet.session.port.SessionLog` on one SQLite file (created with its parent dirs)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sync: str = "normal",
        busy_timeout_s: float = 10.0,
        max_batch_events: int = 5_000,
        retry_deadline_s: float = DEFAULT_DEADLINE_S,
        foreign_tables: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if sync not in SYNC_MODES:
            raise StoreError(f"unknown SQLite sync mode {sync!r} (expected one of: {', '.join(SYNC_MODES)})")
        super().__init__(max_batch_events)
        self.path = Path(path)
        self.sync = sync
        self._busy_timeout_s = busy_timeout_s
        self._foreign_tables = foreign_tables  # True: the file may hold other applications' tables
        self._wall_clock = wall_clock
        self._wake = threading.Event()
        self._writer: threading.Thread | None = None
        self._writer_done: concurrent.futures.Future[None] = concurrent.futures.Future()
        # Owned by the writer thread only.
        self._conn: sqlite3.Connection | None = None
        self._retry = RetryPolicy(deadline_s=retry_deadline_s)
        self._seqs = SeqCache()
        # The read connection serves one query at a time, from worker threads.
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        # Wakes asked for together are read together: one thread hop and one snapshot for a burst
        # (a run starting a thousand sessions at once), one read in flight at a time.
        self._wakes = WakeBatcher(lambda ids: self._read(lambda conn: _wake_many(conn, ids)))

    def __repr__(self) -> str:
        return f"SqliteSessionLog(path={str(self.path)!r}, sync={self.sync!r}, state={self._state.value})"

    # -- lifecycle (_writes.py) ----------------------------------------------------------------

    async def _start(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnreachable(f"cannot open session store {self.path}: {exc.strerror or exc}") from None
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._writer = threading.Thread(target=self._writer_main, args=(ready,), name="session-log-writer", daemon=True)
        self._writer.start()
        try:
            await asyncio.wrap_future(ready)
            self._reader = await asyncio.to_thread(self._connect, True)
        except BaseException:
            self._closing = True
            self._wake.set()
            self._state = Lifecycle.CLOSED
            raise

    async def _stop(self) -> None:
        await asyncio.wrap_future(self._writer_done)
        if self._reader is not None:
            with self._reader_lock:
                self._reader.close()
            self._reader = None

    def _wake_writer(self) -> None:
        self._wake.set()

    # -- the writer thread ---------------------------------------------------------------------

    def _writer_main(self, ready: concurrent.futures.Future[None]) -> None:
        try:
            try:
                if not self._foreign_tables:
                    check_foreign_tables(self.path, self._busy_timeout_s)
                self._conn = self._connect(False)
                create_schema(self._conn, self.path)
            except BaseException as exc:
                ready.set_exception(exc)
                return
            ready.set_result(None)
            try:
                while True:
                    self._wake.wait()
                    self._wake.clear()
                    while self._write_pending():
                        pass
                    if self._idle():
                        return
            finally:
                self._drop_connection()
        finally:
            self._writer_done.set_result(None)

    def _write_pending(self) -> bool:
        """Commit one batch of what the writer was handed; False when there was nothing."""
        appends, snapshots = batch = self._take_batch()
        if not appends and not snapshots:
            return False
        try:
            outcomes = self._commit_retrying(batch)
        except Exception as exc:
            if len(appends) + len(snapshots) > 1 and _request_specific(exc):
                outcomes = self._one_by_one(appends, snapshots)
            else:
                outcomes = self._failed(batch, _as_store_error(exc))
        self._deliver(outcomes)
        return True

    def _one_by_one(self, appends: list[AppendRequest], snapshots: list[SnapshotRequest]) -> list[Outcome]:
        """One bad request must not fail its batch-mates: each in its own transaction."""
        outcomes: list[Outcome] = []
        for single in self._singles(appends, snapshots):
            try:
                outcomes += self._commit_retrying(single)
            except Exception as exc:
                outcomes += self._failed(single, _as_store_error(exc))
        return outcomes

    def _deliver(self, outcomes: list[Outcome]) -> None:
        """Resolves the futures on their event loops: one hop per loop per batch."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
        if self._foreign_loops:
            for outcome in outcomes:
                by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
        elif outcomes and self._loop is not None:
            by_loop[self._loop] = outcomes
        for loop, loop_outcomes in by_loop.items():
            try:
                loop.call_soon_threadsafe(resolve_futures, loop_outcomes)
            except RuntimeError:
                pass  # the caller's loop is gone; nobody is waiting for these

    def _commit_retrying(self, batch: Batch) -> list[Outcome]:
        """One batch, retried on a fresh connection while the failure may pass (_retry.py)."""
        tries = self._retry.start("write")
        while True:
            try:
                conn = self._conn if self._conn is not None else self._connect(False)
                self._conn = conn
                outcomes = write_batch(conn, *batch, self._seqs, self._wall_clock)
            except (sqlite3.OperationalError, StoreUnreachable) as exc:
                if isinstance(exc, sqlite3.OperationalError) and not _transient(exc):
                    raise
                pause = tries.pause_after(str(exc))  # StoreUnavailable past the deadline
                self._drop_connection()
                time.sleep(pause)
                continue
            self._retry.succeeded()
            return outcomes

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._seqs.forget()  # a new connection counts versions afresh: the seq cache is reread
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # -- leases (lease.py) ---------------------------------------------------------------------

    async def read_lease(self, run_id: str) -> Lease | None:
        return await self._read(lambda conn: read_lease(conn, run_id))

    async def swap_lease(self, lease: Lease, expected_epoch: int | None) -> bool:
        self._ensure_open()

        def work() -> bool:
            conn = self._connect(False)
            try:
                return swap_lease(conn, lease, expected_epoch)
            except sqlite3.Error as exc:
                raise StoreError(f"session store lease write failed: {exc}") from None
            finally:
                conn.close()

        return await asyncio.to_thread(work)

    # -- connections (_sqlite_connect.py) -----------------------------------------------------

    def _connect(self, reader: bool) -> sqlite3.Connection:
        return connect(self.path, reader=reader, busy_timeout_s=self._busy_timeout_s, sync=self.sync)

    # -- reads ---------------------------------------------------------------------------------

    async def _read(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        self._ensure_open()

        def run() -> _T:
            with self._reader_lock:
                reader = self._reader
                if reader is None:
                    raise StoreError("session store is closed")
                try:
                    return work(reader)
                except sqlite3.Error as exc:
                    if reader.in_transaction:
                        reader.execute("ROLLBACK")
                    raise StoreError(f"session store read failed: {exc}") from None

        return await asyncio.to_thread(run)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        def work(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(_SELECT_SESSION, (session_id,)).fetchone()
            return None if row is None else _record(row)

        return await self._read(work)

    async def get_events(self, session_id: str, after: int = 0) -> list[Event]:
        def work(conn: sqlite3.Connection) -> list[Event]:
            return _events(conn.execute(_SELECT_EVENTS, (session_id, after)))

        return await self._read(work)

    async def wake(self, session_id: str) -> WakeState:
        self._ensure_open()
        return await self._wakes.wake(session_id)

    async def list_runs(self, limit: int = 100) -> list[SessionRecord]:
        sql = (
            f"SELECT {_SESSION_COLUMNS} FROM {_SESSIONS} WHERE s.kind = 'run' "
            "ORDER BY s.created_at DESC, s.session_id DESC LIMIT ?"
        )
        return await self._read(lambda conn: [_record(row) for row in conn.execute(sql, (max(0, limit),))])

    async def list_sessions(self, run_id: str) -> list[SessionRecord]:
        sql = f"SELECT {_SESSION_COLUMNS} FROM {_SESSIONS} WHERE s.run_id = ? ORDER BY s.session_id"
        return await self._read(lambda conn: [_record(row) for row in conn.execute(sql, (run_id,))])

    async def events_of_run(self, run_id: str, types: Sequence[str] | None = None) -> list[Event]:
        # Walks the (run_id, session_id) index, then each session's (session_id, seq) index:
        # rows come out in the wanted order without a sort.
        sql = (
            "SELECT e.session_id, e.seq, e.type, e.time, e.data FROM fleet_sessions s "
            "JOIN fleet_events e ON e.session_id = s.session_id WHERE s.run_id = ?"
        )
        params: list[Any] = [run_id]
        if types is not None:
            wanted = list(dict.fromkeys(types))
            if not wanted:
                return []
            sql += f" AND e.type IN ({','.join('?' * len(wanted))})"
            params += wanted
        sql += " ORDER BY s.session_id, e.seq"
        return await self._read(lambda conn: _events(conn.execute(sql, params)))

    async def get_snapshot(self, key: str) -> dict[str, Any] | None:
        sql = "SELECT data FROM fleet_snapshots WHERE key = ?"

        def work(conn: sqlite3.Connection) -> dict[str, Any] | None:
            row = conn.execute(sql, (key,)).fetchone()
            return None if row is None else decode_data(row[0])

        return await self._read(work)
