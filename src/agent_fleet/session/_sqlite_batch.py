"""One group-commit batch of the SQLite session log (sqlite.py), written with few statements.

The writer thread shares the interpreter with the event loop. ``executemany`` gives the GIL up
around every row it steps and must win it back for the next one; while the loop is busy (waking
the sessions the last batch acknowledged) each of those hand-overs can wait up to the interpreter's
switch interval. So each table's rows go in as multi-row ``INSERT ... VALUES (...), (...)``
statements instead: the rows are bound in one go and stepped in one call, a handful of hand-overs
per batch instead of one per row. Statement sizes are powers of two (a 1,000-row batch is six
statements), so the connection's statement cache keeps each compiled once.

The projection is one upsert per session per batch: a new session's row is inserted with its
kind, run and first state, a known one's ``last_seq``, ``updated_at`` and state move.

Each session's last ``seq`` is cached (:class:`SeqCache`), but ``PRAGMA data_version`` is checked
inside every write transaction and the cache dropped when another connection (another process
appending to the same file) has committed since, so ``seq`` stays unique and gap-free.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from itertools import chain

from agent_fleet.domain.events import Event
from agent_fleet.session._codec import (
    AppendRequest,
    Outcome,
    SessionDelta,
    SnapshotRequest,
    assign,
    fenced_runs,
    plan_batch,
    split_fenced,
)
from agent_fleet.session._sqlite_lease import lease_epochs

__all__ = ["EVENTS", "INFO", "SESSIONS", "SeqCache", "Values", "session_rows", "write_batch"]

_PUT_SNAPSHOT = (
    "INSERT INTO fleet_snapshots (key, data, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at"
)
_LOOKUP_CHUNK = 500  # bound on host parameters per IN (...) lookup


class Values:
    """``INSERT ... VALUES`` of ``width`` columns for any number of rows, in power-of-two chunks."""

    def __init__(self, head: str, width: int, tail: str = "", most_rows: int = 512) -> None:
        self._head, self._tail, self._width = head, tail, width
        self._row = "(" + ",".join("?" * width) + ")"
        self._most = most_rows
        self._sql: dict[int, str] = {}

    def _statement(self, rows: int) -> str:
        sql = self._sql.get(rows)
        if sql is None:
            sql = self._sql[rows] = f"{self._head} VALUES {','.join([self._row] * rows)}{self._tail}"
        return sql

    def insert(self, conn: sqlite3.Connection, rows: Sequence[Sequence[object]], variable_limit: int) -> None:
        most = max(1, min(self._most, variable_limit // self._width))
        start, total = 0, len(rows)
        while start < total:
            size = min(most, 1 << ((total - start).bit_length() - 1))
            conn.execute(self._statement(size), list(chain.from_iterable(rows[start : start + size])))
            start += size


EVENTS = Values("INSERT INTO fleet_events (session_id, seq, type, time, data)", 5)
SESSIONS = Values(
    "INSERT INTO fleet_sessions (session_id, kind, run_id, state, last_seq, created_at, updated_at)",
    7,
    " ON CONFLICT (session_id) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at, "
    "state = coalesce(excluded.state, fleet_sessions.state)",
)
INFO = Values("INSERT INTO fleet_session_info (session_id, info)", 2)


def session_rows(
    deltas: dict[str, SessionDelta], base: dict[str, int], now: float
) -> tuple[list[tuple[object, ...]], list[tuple[str, str]]]:
    """The projection upserts of a batch and the creating data of the sessions it starts.

    ``base`` is each session's last ``seq`` before the batch, 0 for a session the batch creates.
    A known session's row exists (its ``seq`` was read from it), so its upsert only ever updates:
    ``last_seq``, ``updated_at`` and the batch's state change, or None (the row keeps its state).
    """
    upserts: list[tuple[object, ...]] = []
    created: list[tuple[str, str]] = []
    for sid, delta in deltas.items():
        start = base[sid]
        if start:
            upserts.append((sid, "", None, delta.state, start + delta.count, now, now))
        else:
            upserts.append((sid, delta.kind, delta.run_id, delta.created_state, delta.count, now, now))
            created.append((sid, delta.first_text))
    return upserts, created


class SeqCache:
    """Each session's last ``seq`` as the writer last committed it, valid while no other connection commits."""

    LIMIT = 200_000  # sessions remembered

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self._version = -1

    def forget(self) -> None:
        """A new connection counts versions afresh: everything is read again."""
        self._version = -1

    def check(self, conn: sqlite3.Connection) -> None:
        """Inside a write transaction: drop the cache if another connection committed since the last one."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self.last.clear()
            self._version = version

    def bases(self, conn: sqlite3.Connection, sessions: Sequence[str]) -> dict[str, int]:
        """The last ``seq`` of each session (0 for a new one), read from the table where not cached."""
        known = self.last
        base = {sid: known.get(sid, 0) for sid in sessions}
        unknown = [sid for sid in sessions if sid not in known]
        for start in range(0, len(unknown), _LOOKUP_CHUNK):
            chunk = unknown[start : start + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT session_id, last_seq FROM fleet_sessions WHERE session_id IN ({marks})"
            base.update(conn.execute(sql, chunk).fetchall())
        return base

    def committed(self, base: dict[str, int]) -> None:
        if len(self.last) > self.LIMIT:
            self.last.clear()
        self.last.update(base)


def write_batch(
    conn: sqlite3.Connection,
    appends: list[AppendRequest],
    snapshots: list[SnapshotRequest],
    seqs: SeqCache,
    clock: Callable[[], float],
) -> list[Outcome]:
    """Commits one batch in one ``BEGIN IMMEDIATE`` transaction; the outcome of each request."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        seqs.check(conn)
        refused: list[tuple[asyncio.Future[list[Event]], BaseException]] = []
        runs = fenced_runs(appends)
        if runs:  # fencing: the epoch is read in this transaction, so no takeover can slip in between
            appends, refused = split_fenced(appends, lease_epochs(conn, runs))
        deltas = plan_batch(appends, ordered=False)  # one writer at a time: no lock order to keep
        base = seqs.bases(conn, list(deltas))
        now = clock()
        upserts, created = session_rows(deltas, base, now)
        rows, outcomes = assign(appends, base, now)
        limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        EVENTS.insert(conn, rows, limit)
        SESSIONS.insert(conn, upserts, limit)
        INFO.insert(conn, created, limit)
        if snapshots:
            conn.executemany(_PUT_SNAPSHOT, [(s.key, s.text, now) for s in snapshots])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    seqs.committed(base)
    outcomes += [(s.future, []) for s in snapshots]
    outcomes += refused
    return outcomes
