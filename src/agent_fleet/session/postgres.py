"""The scale-out session log: PostgreSQL through asyncpg, with the same group commit as SQLite.

Group commit. Callers enqueue append requests and await a future; one writer task per
process (owned by the log: started by :meth:`open`, drained and joined by :meth:`close`)
drains the queue and commits each batch in one transaction, then resolves the futures.
A commit returns after PostgreSQL has flushed its WAL (``synchronous_commit`` on, the server
default), so an acknowledged event survives the death of this process and of the server.

``seq``. The writer keeps each session's last ``seq`` (:class:`~agent_fleet.session._codec.LastSeqs`),
read once from the events (``max(seq)``) and advanced by every batch it commits, so a batch numbers
its events without a round trip. Several processes may append to the same store, even to the same
session: the primary key on ``(session_id, seq)`` refuses a ``seq`` another writer took meanwhile
(its batch is rolled back whole, so nothing is half-written), and the writer reads those sessions'
``seq`` again and commits the batch again. Since ``seq`` has no gaps, a stale entry always names
a ``seq`` that is taken: it cannot slip through.

The projection row (kind, run, state, creation time) is written when a session is created and when
its state changes, in the batch's transaction; a session's last ``seq`` and last event time are read
from its newest event. The creating event's data (``info``, possibly large) lives in its own table.
Version 1 of the schema rewrote ``last_seq`` and ``updated_at`` in every batch; opening a version-1
store drops the two columns (version 2).

One writer per process: spreading sessions over several writer connections ("lanes") was
measured no faster on a 2-core host, where the server is the bottleneck; scale-out processes
already write in parallel.

Events go in with ``COPY`` (``copy_records_to_table``): measured ~1.6x faster than
``executemany`` for 2,000-event batches and no slower for 10-event ones. ``data`` is ``jsonb``.
A NULL ``state`` in the projection means the stream has not moved since it was created.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg

from agent_fleet.domain.events import Event, SessionRecord
from agent_fleet.errors import ConfigError, StoreError, StoreUnreachable
from agent_fleet.session._codec import (
    AppendRequest,
    BatchPlan,
    LastSeqs,
    Row,
    SnapshotRequest,
    decode_data,
    fenced_runs,
    foreign_tables_message,
    plan_appends,
    record_from_row,
    redact_url,
    resolve_futures,
    split_fenced,
)
from agent_fleet.session._codec import (
    Outcome as _Outcome,
)
from agent_fleet.session._pg_sql import Statements
from agent_fleet.session._retry import DEFAULT_DEADLINE_S, RetryPolicy
from agent_fleet.session._wakes import WakeBatcher
from agent_fleet.session._writes import QueuedWrites
from agent_fleet.session.lease import Lease, LeaseOwner
from agent_fleet.session.port import WakeState

__all__ = ["PostgresSessionLog"]

SCHEMA_VERSION = 2
_MOST_CONFLICTS = 50  # batches in a row refused for a seq another writer took, before giving up
_T = TypeVar("_T")


# Failures that may pass: a dropped or terminated connection, a server restarting or out of disk.
_TRANSIENT = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,  # a connection cut off mid-operation, left in a bad state
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.ReadOnlySQLTransactionError,
)


@dataclass(slots=True)
class _Attempt:
    """One try of a batch: its rows and acknowledgements, set once only its COMMIT is left."""

    rows: list[Row] = field(default_factory=list)
    outcomes: list[_Outcome] | None = None
    last: dict[str, int] = field(default_factory=dict)  # each session's last seq once it is committed


class PostgresSessionLog(QueuedWrites):
    """:class:`~agent_fleet.session.port.SessionLog` on PostgreSQL; tables live in ``schema`` if given."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        pool_max: int = 8,
        max_batch_events: int = 5_000,
        connect_timeout_s: float = 10.0,
        retry_deadline_s: float = DEFAULT_DEADLINE_S,
        foreign_tables: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(max_batch_events)
        self._dsn = dsn
        self.schema = schema
        self._pool_max = max(2, pool_max)
        self._connect_timeout_s = connect_timeout_s
        self._wall_clock = wall_clock
        self._retry = RetryPolicy(deadline_s=retry_deadline_s)
        self._foreign_tables = foreign_tables  # True: the schema may hold other applications' tables
        self._pool: asyncpg.Pool | None = None
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._sql = Statements(f'"{schema}".' if schema else "")
        self._seqs = LastSeqs()  # owned by the writer task
        self._wakes = WakeBatcher(self._wake_many)

    def __repr__(self) -> str:
        return f"PostgresSessionLog(url={redact_url(self._dsn)!r}, schema={self.schema!r}, state={self._state.value})"

    # -- lifecycle (_writes.py) ----------------------------------------------------------------

    async def _start(self) -> None:
        try:
            self._pool = await asyncpg.create_pool(
                self._dsn, min_size=1, max_size=self._pool_max, timeout=self._connect_timeout_s
            )
            async with self._pool.acquire() as conn, conn.transaction():
                # Serialises concurrent first opens: CREATE ... IF NOT EXISTS is not race-free.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agent_fleet.session_log'))")
                if not self._foreign_tables:
                    names = [r[0] for r in await conn.fetch(self._sql.foreign_tables, self.schema)]
                    if names:
                        where = f"{redact_url(self._dsn)} (schema {self.schema or 'current'})"
                        raise ConfigError(foreign_tables_message(where, names))
                if self.schema:
                    await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                await conn.execute(self._sql.schema)
                await self._migrate(conn)
        except (StoreError, ConfigError):
            await self._discard_pool()
            raise
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            await self._discard_pool()
            raise StoreUnreachable(f"cannot reach session store {redact_url(self._dsn)}: {self._reason(exc)}") from None
        # Owned, not fire-and-forget: close() drains the queue and awaits this task.
        self._writer = asyncio.get_running_loop().create_task(self._writer_main(), name="session-log-writer")

    async def _migrate(self, conn: asyncpg.Connection) -> None:
        """Brings a store written by an older schema version up to this one (in the open's transaction)."""
        version = await conn.fetchval(self._sql.schema_version)
        if version is not None and int(version) > SCHEMA_VERSION:
            raise StoreError(f"session store has schema version {version}; this version reads {SCHEMA_VERSION}")
        if version is None or int(version) < SCHEMA_VERSION:
            for step in range(int(version or SCHEMA_VERSION), SCHEMA_VERSION):
                await conn.execute(self._sql.migrations[step])
            await conn.execute(self._sql.set_schema_version, str(SCHEMA_VERSION))

    async def _stop(self) -> None:
        if self._writer is not None:
            await asyncio.shield(self._writer)
        await self._discard_pool()

    async def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=self._connect_timeout_s)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                pool.terminate()

    def _reason(self, exc: BaseException) -> str:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        password = urlsplit(self._dsn).password
        return reason.replace(password, "***") if password else reason

    # -- writes --------------------------------------------------------------------------------

    def _wake_writer(self) -> None:
        self._wake.set()

    async def _writer_main(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while await self._write_pending():
                pass
            if self._idle():
                return

    async def _write_pending(self) -> bool:
        """Commit one batch of what the writer was handed; False when there was nothing."""
        appends, snapshots = batch = self._take_batch()
        if not appends and not snapshots:
            return False
        try:
            outcomes = await self._commit_retrying(appends, snapshots)
        except Exception as exc:
            if len(appends) + len(snapshots) > 1 and _request_specific(exc):
                outcomes = await self._one_by_one(appends, snapshots)
            else:
                outcomes = self._failed(batch, _as_store_error(exc))
        resolve_futures(outcomes)
        return True

    async def _one_by_one(self, appends: list[AppendRequest], snapshots: list[SnapshotRequest]) -> list[_Outcome]:
        """One bad request must not fail its batch-mates: each in its own transaction."""
        outcomes: list[_Outcome] = []
        for single in self._singles(appends, snapshots):
            try:
                outcomes += await self._commit_retrying(*single)
            except Exception as exc:
                outcomes += self._failed(single, _as_store_error(exc))
        return outcomes

    async def _commit_retrying(self, appends: list[AppendRequest], snapshots: list[SnapshotRequest]) -> list[_Outcome]:
        """One batch, retried on a fresh connection while the failure may pass (_retry.py).

        A connection lost while its COMMIT was in flight leaves the outcome unknown: the retry first
        looks for the very rows it sent (same ``(session_id, seq)`` and time) and, when they are there,
        acknowledges them instead of writing the batch twice.
        """
        tries = self._retry.start("write")
        attempt = _Attempt()
        conflicts = 0
        while True:
            try:
                if attempt.outcomes is not None and await self._landed(attempt):
                    outcomes = attempt.outcomes
                    self._seqs.committed(attempt.last)
                else:
                    attempt = _Attempt()
                    outcomes = await self._commit(appends, snapshots, attempt)
            except _TRANSIENT as exc:
                await asyncio.sleep(tries.pause_after(_first_line(exc)))  # StoreUnavailable past the deadline
                continue
            except asyncpg.UniqueViolationError:
                # Another writer took a seq this batch numbered from: read those sessions again.
                conflicts += 1
                if conflicts >= _MOST_CONFLICTS:
                    raise
                self._seqs.forget(r.session_id for r in appends)
                continue
            self._retry.succeeded()
            return outcomes

    async def _replace_connections(self, broken: asyncpg.Connection) -> None:
        """After a connection failed: drop it, and have the pool open fresh ones for the retry
        (a server restart or ``pg_terminate_backend`` cut the idle ones too)."""
        with contextlib.suppress(Exception):
            broken.terminate()
        if self._pool is not None:
            await self._pool.expire_connections()

    async def _landed(self, attempt: _Attempt) -> bool:
        """Whether every row of an attempt whose COMMIT was cut off is in the store."""
        if not attempt.rows or self._pool is None:
            return False  # snapshots only: writing them again is harmless
        sids, seqs, times = zip(*((r[0], r[1], r[3]) for r in attempt.rows), strict=True)
        found = await self._read(lambda conn: conn.fetchval(self._sql.landed, list(sids), list(seqs), list(times)))
        return int(found) == len(attempt.rows)

    async def _commit(
        self, appends: list[AppendRequest], snapshots: list[SnapshotRequest], attempt: _Attempt
    ) -> list[_Outcome]:
        pool = self._pool
        if pool is None:
            raise StoreError("session store is closed")
        async with pool.acquire() as conn:
            try:
                return await self._commit_on(conn, appends, snapshots, attempt)
            except _TRANSIENT:
                await self._replace_connections(conn)
                raise

    async def _commit_on(
        self,
        conn: asyncpg.Connection,
        appends: list[AppendRequest],
        snapshots: list[SnapshotRequest],
        attempt: _Attempt,
    ) -> list[_Outcome]:
        now = self._wall_clock()
        sql = self._sql
        refused: list[tuple[asyncio.Future[Any], BaseException]] = []
        async with conn.transaction():
            runs = fenced_runs(appends)
            if runs:  # fencing: FOR SHARE holds off a takeover (an UPDATE of the row) until this commits
                epochs = {rid: int(e) for rid, e in await conn.fetch(sql.lease_epochs, runs)}
                appends, refused = split_fenced(appends, epochs)
            unknown = self._seqs.unknown(appends)
            if unknown:
                self._seqs.read(unknown, [(sid, int(last)) for sid, last in await conn.fetch(sql.last_seqs, unknown)])
            plan = plan_appends(appends, self._seqs.last, now)
            if plan.created or plan.moved:
                await self._write_projection(conn, plan, now)
            if plan.rows:
                await conn.copy_records_to_table(
                    "fleet_events",
                    records=plan.rows,
                    columns=("session_id", "seq", "type", "time", "data"),
                    schema_name=self.schema,
                )
            if snapshots:
                await conn.executemany(sql.put_snapshot, [(s.key, s.text, now) for s in snapshots])
            outcomes = plan.acks
            outcomes += [(s.future, []) for s in snapshots]
            outcomes.extend(refused)
            attempt.rows, attempt.outcomes, attempt.last = plan.rows, outcomes, plan.last  # only the COMMIT is left
        self._seqs.committed(plan.last)
        return outcomes

    async def _write_projection(self, conn: asyncpg.Connection, plan: BatchPlan, now: float) -> None:
        """The rows of the sessions the batch creates (with their creating data), the states it moves."""
        sql = self._sql
        if plan.created:
            deltas = list(plan.created.values())
            sids = [d.session_id for d in deltas]
            kinds, runs, states = (
                [d.kind for d in deltas],
                [d.run_id for d in deltas],
                [d.created_state for d in deltas],
            )
            await conn.execute(sql.insert_sessions, sids, kinds, runs, states, now)
            await conn.execute(sql.insert_info, sids, [d.first_text for d in deltas])
        if plan.moved:
            # Two writers moving the same sessions at once may deadlock: the server detects it and the
            # batch is retried (a transient failure).
            moved = sorted(plan.moved.items())
            await conn.execute(sql.move_sessions, [sid for sid, _ in moved], [state for _, state in moved])

    # -- leases (lease.py) ---------------------------------------------------------------------

    async def read_lease(self, run_id: str) -> Lease | None:
        row = await self._read(lambda conn: conn.fetchrow(self._sql.read_lease, run_id))
        if row is None:
            return None
        rid, epoch, host, pid, started, heartbeat, expires = row
        return Lease(rid, int(epoch), LeaseOwner(host, int(pid), float(started)), float(heartbeat), float(expires))

    async def swap_lease(self, lease: Lease, expected_epoch: int | None) -> bool:
        o = lease.owner
        args = (lease.run_id, lease.epoch, o.host, o.pid, o.start, lease.heartbeat, lease.expires)
        try:
            if expected_epoch is None:
                done = await self._reader().fetchval(self._sql.insert_lease, *args)
            else:
                done = await self._reader().fetchval(self._sql.update_lease, *args, expected_epoch)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"session store lease write failed: {_first_line(exc)}") from None
        return done is not None

    # -- reads ---------------------------------------------------------------------------------

    def _reader(self) -> asyncpg.Pool:
        self._ensure_open()
        assert self._pool is not None
        return self._pool

    async def _read(self, op: Callable[[asyncpg.Connection], Awaitable[_T]]) -> _T:
        """One read, retried like a write while its failure may pass (a dropped connection)."""
        tries = self._retry.start("read")
        while True:
            try:
                async with self._reader().acquire() as conn:
                    try:
                        value = await op(conn)
                    except _TRANSIENT:
                        await self._replace_connections(conn)
                        raise
            except _TRANSIENT as exc:
                await asyncio.sleep(tries.pause_after(_first_line(exc)))  # StoreUnavailable past the deadline
                continue
            except asyncpg.PostgresError as exc:
                raise _read_error(exc) from None
            self._retry.succeeded()
            return value

    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = await self._read(lambda conn: conn.fetchrow(self._sql.select_session, session_id))
        return None if row is None else _record(row)

    async def get_events(self, session_id: str, after: int = 0) -> list[Event]:
        return await self._fetch_events(self._sql.select_events, session_id, after)

    async def wake(self, session_id: str) -> WakeState:
        self._ensure_open()
        return await self._wakes.wake(session_id)

    async def _wake_many(self, ids: Sequence[str]) -> dict[str, WakeState]:
        """Records and histories of many sessions in one snapshot (one read transaction)."""

        async def snapshot(conn: asyncpg.Connection) -> tuple[list[Any], list[Any]]:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                records = await conn.fetch(self._sql.select_sessions_any, list(ids))
                rows = await conn.fetch(self._sql.select_events_any, list(ids)) if records else []
            return records, rows

        records, rows = await self._read(snapshot)
        history: dict[str, list[Event]] = {}
        for ev in _events(rows):
            history.setdefault(ev.session_id, []).append(ev)
        return {rec.session_id: WakeState(rec, tuple(history.get(rec.session_id, ()))) for rec in map(_record, records)}

    async def list_runs(self, limit: int = 100) -> list[SessionRecord]:
        return await self._fetch_records(self._sql.list_runs, max(0, limit))

    async def list_sessions(self, run_id: str) -> list[SessionRecord]:
        return await self._fetch_records(self._sql.list_sessions, run_id)

    async def events_of_run(self, run_id: str, types: Sequence[str] | None = None) -> list[Event]:
        if types is None:
            return await self._fetch_events(self._sql.events_of_run, run_id)
        wanted = list(dict.fromkeys(types))
        if not wanted:
            return []
        return await self._fetch_events(self._sql.events_of_run_typed, run_id, wanted)

    async def get_snapshot(self, key: str) -> dict[str, Any] | None:
        text = await self._read(lambda conn: conn.fetchval(self._sql.get_snapshot, key))
        return None if text is None else decode_data(text)

    async def _fetch_events(self, query: str, *args: Any) -> list[Event]:
        return _events(await self._read(lambda conn: conn.fetch(query, *args)))

    async def _fetch_records(self, query: str, *args: Any) -> list[SessionRecord]:
        return [_record(row) for row in await self._read(lambda conn: conn.fetch(query, *args))]


def _record(row: Any) -> SessionRecord:
    sid, kind, run_id, state, last_seq, created_at, updated_at, info = row
    return record_from_row(sid, kind, run_id, state, last_seq, created_at, updated_at, decode_data(info))


def _events(rows: Any) -> list[Event]:
    return [Event(sid, seq, type_, time_, decode_data(data)) for sid, seq, type_, time_, data in rows]


def _request_specific(exc: BaseException) -> bool:
    """Errors one request's content can cause (bad text, bad JSON); others fail the whole batch."""
    return isinstance(exc, (asyncpg.DataError, ValueError, OverflowError))


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _as_store_error(exc: BaseException) -> BaseException:
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError)):
        error = StoreError(f"session store write failed: {_first_line(exc)}")
        error.__cause__ = exc
        return error
    return exc


def _read_error(exc: BaseException) -> StoreError:
    return StoreError(f"session store read failed: {_first_line(exc)}")
