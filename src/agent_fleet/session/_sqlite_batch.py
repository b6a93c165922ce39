"""One group-commit batch of the SQLite session log (sqlite.py), written with few statements.

The writer thread shares the interpreter with the event loop. ``executemany`` gives the GIL up
around every row it steps and must win it back for the next one; while the loop is busy (waking
the sessions the last batch acknowledged) each of those hand-overs can wait up to the interpreter's
switch interval. So each table's rows go in as multi-row ``INSERT ... VALUES (...), (...)``
statements instead: the rows are bound in one go and stepped in one call, a handful of hand-overs
per batch instead of one per row. Statement sizes are powers of two (a 1,000-row batch is six
statements), so the connection's statement cache keeps each compiled once.

The projection is written only where the batch changes it: a row for each session the batch
creates, and the new state of each session whose state it moves. A session's last ``seq`` and the
time of its last event are its newest event's (see ``_sqlite_rows``), so most batches write events only.

Each session's last ``seq`` is cached (:class:`SeqCache`), but ``PRAGMA data_version`` is checked
inside every write transaction and the cache dropped when another connection (another process
appending to the same file) has committed since, so ``seq`` stays unique and gap-free.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Any

from agent_fleet.session._codec import (
    AppendRequest,
    BatchPlan,
    LastSeqs,
    Outcome,
    SnapshotRequest,
    fenced_runs,
    plan_appends,
    split_fenced,
)
from agent_fleet.session._sqlite_lease import lease_epochs

__all__ = ["EVENTS", "INFO", "SESSIONS", "SeqCache", "Values", "write_batch"]

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
SESSIONS = Values("INSERT INTO fleet_sessions (session_id, kind, run_id, state, created_at)", 5)
INFO = Values("INSERT INTO fleet_session_info (session_id, info)", 2)
_MOVE = "UPDATE fleet_sessions SET state = ? WHERE session_id = ?"


def _write_projection(conn: sqlite3.Connection, plan: BatchPlan, now: float, limit: int) -> None:
    """The rows of the sessions the batch creates (with their creating data), the states it moves."""
    if plan.created:
        deltas = plan.created.values()
        SESSIONS.insert(conn, [(d.session_id, d.kind, d.run_id, d.created_state, now) for d in deltas], limit)
        INFO.insert(conn, [(d.session_id, d.first_text) for d in deltas], limit)
    if plan.moved:
        conn.executemany(_MOVE, [(state, sid) for sid, state in plan.moved.items()])


class SeqCache(LastSeqs):
    """The last ``seq`` cache of the SQLite writer, valid while no other connection commits."""

    def __init__(self) -> None:
        super().__init__()
        self._version = -1

    def forget(self, sessions: Iterable[str] | None = None) -> None:
        """A new connection counts versions afresh: everything is read again."""
        super().forget(sessions)
        self._version = -1

    def check(self, conn: sqlite3.Connection) -> None:
        """Inside a write transaction: drop the cache if another connection committed since the last one."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self.last.clear()
            self._version = version

    def look_up(self, conn: sqlite3.Connection, requests: Sequence[AppendRequest]) -> None:
        """Reads the last ``seq`` of the batch's sessions that are not cached (0: no events yet)."""
        unknown = self.unknown(requests)
        for start in range(0, len(unknown), _LOOKUP_CHUNK):
            chunk = unknown[start : start + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT session_id, max(seq) FROM fleet_events WHERE session_id IN ({marks}) GROUP BY session_id"
            self.read(chunk, conn.execute(sql, chunk).fetchall())


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
        refused: list[tuple[asyncio.Future[Any], BaseException]] = []
        runs = fenced_runs(appends)
        if runs:  # fencing: the epoch is read in this transaction, so no takeover can slip in between
            appends, refused = split_fenced(appends, lease_epochs(conn, runs))
        seqs.look_up(conn, appends)
        now = clock()
        plan = plan_appends(appends, seqs.last, now)
        limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        EVENTS.insert(conn, plan.rows, limit)
        if plan.created or plan.moved:
            _write_projection(conn, plan, now, limit)
        if snapshots:
            conn.executemany(_PUT_SNAPSHOT, [(s.key, s.text, now) for s in snapshots])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    seqs.committed(plan.last)
    outcomes = plan.acks
    outcomes += [(s.future, []) for s in snapshots]
    outcomes += refused
    return outcomes
