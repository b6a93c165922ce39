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

Group commit. Callers enqueue append requests and await a future. One writer thread, with
its own connection, drains the queue, commits everything it drained in one ``BEGIN
IMMEDIATE`` transaction, and only then resolves the futures (one hop to the event loop per
batch). While a batch commits the next one accumulates, so batches grow with load and no
timer is needed. Reads use a second connection; WAL readers never block the writer.

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
import collections
import concurrent.futures
import contextlib
import enum
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agent_fleet.domain.events import Event, SessionRecord
from agent_fleet.errors import StoreError, StoreUnreachable
from agent_fleet.session._codec import (
    AppendRequest,
    SnapshotRequest,
    assign,
    decode_data,
    fenced_runs,
    plan_batch,
    resolve_futures,
    split_fenced,
)
from agent_fleet.session._retry import DEFAULT_DEADLINE_S, RetryPolicy
from agent_fleet.session._sqlite_connect import SCHEMA_VERSION as SCHEMA_VERSION
from agent_fleet.session._sqlite_connect import SYNC_MODES, check_foreign_tables, connect, create_schema
from agent_fleet.session._sqlite_lease import lease_epochs, read_lease, swap_lease
from agent_fleet.session._sqlite_rows import SESSION_COLUMNS as _SESSION_COLUMNS
from agent_fleet.session._sqlite_rows import SESSIONS as _SESSIONS
from agent_fleet.session._sqlite_rows import as_store_error as _as_store_error
from agent_fleet.session._sqlite_rows import events as _events
from agent_fleet.session._sqlite_rows import record as _record
from agent_fleet.session._sqlite_rows import request_specific as _request_specific
from agent_fleet.session._sqlite_rows import transient as _transient
from agent_fleet.session._sqlite_rows import wake_many as _wake_many
from agent_fleet.session._wakes import WakeBatcher
from agent_fleet.session._writes import QueuedWrites
from agent_fleet.session.lease import Lease
from agent_fleet.session.port import WakeState

__all__ = ["SqliteSessionLog"]

_T = TypeVar("_T")
_Outcome = tuple[asyncio.Future[list[Event]], list[Event] | BaseException]

_INSERT_EVENT = "INSERT INTO fleet_events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)"
_INSERT_SESSION = (
    "INSERT INTO fleet_sessions (session_id, kind, run_id, state, last_seq, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_INFO = "INSERT INTO fleet_session_info (session_id, info) VALUES (?, ?)"
_UPDATE_SESSION = (
    "UPDATE fleet_sessions SET last_seq = ?, updated_at = ?, state = coalesce(?, state) WHERE session_id = ?"
)
_PUT_SNAPSHOT = (
    "INSERT INTO fleet_snapshots (key, data, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at"
)
_SELECT_SESSION = f"SELECT {_SESSION_COLUMNS} FROM {_SESSIONS} WHERE s.session_id = ?"
_SELECT_EVENTS = (
    "SELECT session_id, seq, type, time, data FROM fleet_events WHERE session_id = ? AND seq > ? ORDER BY seq"
)

_LOOKUP_CHUNK = 500  # bound on host parameters per IN (...) lookup
_SEQ_CACHE_LIMIT = 200_000  # sessions whose last seq the writer remembers


class _Lifecycle(enum.Enum):
    NEW = "new"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


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
        self.path = Path(path)
        self.sync = sync
        self._busy_timeout_s = busy_timeout_s
        self._foreign_tables = foreign_tables  # True: the file may hold other applications' tables
        self._max_batch_events = max(1, max_batch_events)
        self._wall_clock = wall_clock
        self._state = _Lifecycle.NEW
        self._appends: collections.deque[AppendRequest] = collections.deque()
        self._snapshots: collections.deque[SnapshotRequest] = collections.deque()
        self._wake = threading.Event()
        self._fences: dict[str, int] = {}
        self._closing = False
        self._writer: threading.Thread | None = None
        self._writer_done: concurrent.futures.Future[None] = concurrent.futures.Future()
        # Owned by the writer thread only.
        self._conn: sqlite3.Connection | None = None
        self._retry = RetryPolicy(deadline_s=retry_deadline_s)
        self._last_seq: dict[str, int] = {}
        self._data_version = -1
        # The read connection serves one query at a time, from worker threads.
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        # Wakes asked for together are read together: one thread hop and one snapshot for a burst
        # (a run starting a thousand sessions at once), one read in flight at a time.
        self._wakes = WakeBatcher(lambda ids: self._read(lambda conn: _wake_many(conn, ids)))

    def __repr__(self) -> str:
        return f"SqliteSessionLog(path={str(self.path)!r}, sync={self.sync!r}, state={self._state.value})"

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._state is _Lifecycle.OPEN:
            return
        if self._state is not _Lifecycle.NEW:
            raise StoreError("a closed session store cannot be reopened; create a new one")
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
            self._state = _Lifecycle.CLOSED
            raise
        self._state = _Lifecycle.OPEN

    async def close(self) -> None:
        if self._state is _Lifecycle.NEW:
            self._state = _Lifecycle.CLOSED
            return
        if self._state is _Lifecycle.OPEN:
            self._state = _Lifecycle.CLOSING
            self._closing = True
            self._wake.set()
        # Every request queued before close() is committed and acknowledged before this returns.
        await asyncio.wrap_future(self._writer_done)
        if self._reader is not None:
            with self._reader_lock:
                self._reader.close()
            self._reader = None
        self._state = _Lifecycle.CLOSED

    # -- writes --------------------------------------------------------------------------------

    def _wake_writer(self) -> None:
        self._wake.set()

    def _submit(self, request: AppendRequest) -> asyncio.Future[list[Event]]:
        self._ensure_open()
        self._appends.append(request)
        # The writer clears the flag before it drains, so a set flag means this request will be seen.
        if not self._wake.is_set():
            self._wake.set()
        return request.future

    def _ensure_open(self) -> None:
        if self._state is not _Lifecycle.OPEN:
            raise StoreError(f"session store is {self._state.value}, not open")

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
                    if self._closing and not self._appends and not self._snapshots:
                        return
            finally:
                self._drop_connection()
        finally:
            self._writer_done.set_result(None)

    def _write_pending(self) -> bool:
        """Commit one batch from the queues; False when they were empty."""
        appends, snapshots = self._take_batch()
        if not appends and not snapshots:
            return False
        outcomes: list[tuple[asyncio.Future[list[Event]], list[Event] | BaseException]]
        try:
            outcomes = self._commit_retrying(appends, snapshots)
        except Exception as exc:
            everyone: list[AppendRequest | SnapshotRequest] = [*appends, *snapshots]
            if len(everyone) > 1 and _request_specific(exc):
                # One bad request must not fail its batch-mates: retry each in its own transaction.
                outcomes = []
                for one in everyone:
                    try:
                        if isinstance(one, AppendRequest):
                            outcomes += self._commit_retrying([one], [])
                        else:
                            outcomes += self._commit_retrying([], [one])
                    except Exception as single:
                        outcomes.append((one.future, _as_store_error(single)))
            else:
                error = _as_store_error(exc)
                outcomes = [(r.future, error) for r in everyone]
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        for outcome in outcomes:
            by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
        for loop, loop_outcomes in by_loop.items():
            try:
                loop.call_soon_threadsafe(resolve_futures, loop_outcomes)
            except RuntimeError:
                pass  # the caller's loop is gone; nobody is waiting for these
        return True

    def _commit_retrying(self, appends: list[AppendRequest], snapshots: list[SnapshotRequest]) -> list[_Outcome]:
        """One batch, retried on a fresh connection while the failure may pass (_retry.py)."""
        tries = self._retry.start("write")
        while True:
            try:
                conn = self._conn if self._conn is not None else self._connect(False)
                self._conn = conn
                outcomes = self._commit(conn, appends, snapshots)
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
        self._data_version = -1  # a new connection counts versions afresh: the seq cache is reread
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _commit(
        self, conn: sqlite3.Connection, appends: list[AppendRequest], snapshots: list[SnapshotRequest]
    ) -> list[tuple[asyncio.Future[list[Event]], list[Event] | BaseException]]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:
                # Another connection committed since our last transaction: cached seqs may be stale.
                self._last_seq.clear()
                self._data_version = version
            refused: list[tuple[asyncio.Future[list[Event]], BaseException]] = []
            runs = fenced_runs(appends)
            if runs:  # fencing: the epoch is read in this transaction, so no takeover can slip in between
                appends, refused = split_fenced(appends, lease_epochs(conn, runs))
            deltas = plan_batch(appends)
            known = self._last_seq
            unknown = [sid for sid in deltas if sid not in known]
            base = {sid: known.get(sid, 0) for sid in deltas}
            for start in range(0, len(unknown), _LOOKUP_CHUNK):
                chunk = unknown[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT session_id, last_seq FROM fleet_sessions WHERE session_id IN ({marks})"
                base.update(conn.execute(sql, chunk).fetchall())
            now = self._wall_clock()
            inserts = []
            updates = []
            for sid, delta in deltas.items():
                last = base[sid] + delta.count
                if base[sid] == 0:
                    inserts.append((sid, delta.kind, delta.run_id, delta.created_state, last, now, now))
                else:
                    updates.append((last, now, delta.state, sid))
            rows, acks = assign(appends, base, now)
            conn.executemany(_INSERT_EVENT, rows)
            if inserts:
                conn.executemany(_INSERT_SESSION, inserts)
                conn.executemany(_INSERT_INFO, [(row[0], deltas[row[0]].first_text) for row in inserts])
            if updates:
                conn.executemany(_UPDATE_SESSION, updates)
            if snapshots:
                conn.executemany(_PUT_SNAPSHOT, [(s.key, s.text, now) for s in snapshots])
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if len(known) > _SEQ_CACHE_LIMIT:
            known.clear()
        known.update(base)
        outcomes: list[tuple[asyncio.Future[list[Event]], list[Event] | BaseException]] = [
            (request.future, events) for request, events in acks
        ]
        outcomes += [(s.future, []) for s in snapshots]
        outcomes.extend(refused)
        return outcomes

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
