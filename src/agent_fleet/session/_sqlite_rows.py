"""Rows of the SQLite session log (sqlite.py): records, events, batched wakes, error kinds."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_fleet.domain.events import Event, SessionRecord
from agent_fleet.errors import StoreError
from agent_fleet.session._codec import decode_data, record_from_row
from agent_fleet.session.port import WakeState

__all__ = [
    "SCHEMA",
    "SESSIONS",
    "SESSIONS_INDEXES",
    "SESSIONS_TABLE",
    "SESSION_COLUMNS",
    "as_store_error",
    "events",
    "record",
    "request_specific",
    "transient",
    "wake_many",
]

SESSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS fleet_sessions (
    session_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    run_id TEXT,
    state TEXT,
    created_at REAL NOT NULL
) WITHOUT ROWID
"""
SESSIONS_INDEXES = """
CREATE INDEX IF NOT EXISTS fleet_sessions_by_run ON fleet_sessions (run_id, session_id);
CREATE INDEX IF NOT EXISTS fleet_sessions_by_kind ON fleet_sessions (kind, created_at);
"""
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS fleet_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fleet_events (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
{SESSIONS_TABLE};
{SESSIONS_INDEXES}
CREATE TABLE IF NOT EXISTS fleet_session_info (session_id TEXT PRIMARY KEY, info TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fleet_snapshots (key TEXT PRIMARY KEY, data TEXT NOT NULL, updated_at REAL NOT NULL);
"""
# Events are a rowid table (appends land at the end of the B-tree) with a (session_id, seq)
# index: measured ~2x faster to insert than a WITHOUT ROWID table keyed by (session_id, seq),
# and large model responses do not bloat the key B-tree.
# The projection row holds what only changes now and then (kind, run, state, creation time); it is
# written when the session is created and when its state changes, not by every batch. A session's
# last ``seq`` and the time of its last event (``updated_at``) are read from its newest event, one
# probe of the (session_id, seq) index. The creating event's data (``info``, possibly large) lives in
# its own table, written once.
SESSION_COLUMNS = (
    "s.session_id, s.kind, s.run_id, s.state, coalesce(l.seq, 0), s.created_at, coalesce(l.time, s.created_at), i.info"
)
SESSIONS = (
    "fleet_sessions s LEFT JOIN fleet_session_info i ON i.session_id = s.session_id "
    "LEFT JOIN fleet_events l ON l.session_id = s.session_id "
    "AND l.seq = (SELECT max(e.seq) FROM fleet_events e WHERE e.session_id = s.session_id)"
)
_IN_CHUNK = 500  # session ids per IN (...) list, well under SQLite's bound-parameter limit


def record(row: Any) -> SessionRecord:
    sid, kind, run_id, state, last_seq, created_at, updated_at, info = row
    return record_from_row(sid, kind, run_id, state, last_seq, created_at, updated_at, decode_data(info))


def events(rows: Any) -> list[Event]:
    return [Event(sid, seq, type_, time_, decode_data(data)) for sid, seq, type_, time_, data in rows]


def wake_many(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, WakeState]:
    """Records and histories of many sessions in one read transaction (one snapshot)."""
    out: dict[str, WakeState] = {}
    conn.execute("BEGIN")
    try:
        for start in range(0, len(ids), _IN_CHUNK):
            chunk = list(ids[start : start + _IN_CHUNK])
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT {SESSION_COLUMNS} FROM {SESSIONS} WHERE s.session_id IN ({marks})"
            records = [record(row) for row in conn.execute(sql, chunk)]
            history: dict[str, list[Event]] = {}
            rows = conn.execute(
                "SELECT session_id, seq, type, time, data FROM fleet_events "
                f"WHERE session_id IN ({marks}) ORDER BY session_id, seq",
                chunk,
            )
            for ev in events(rows):
                history.setdefault(ev.session_id, []).append(ev)
            for rec in records:
                out[rec.session_id] = WakeState(rec, tuple(history.get(rec.session_id, ())))
    finally:
        conn.execute("COMMIT")
    return out


# Failures that may pass: a full disk, an I/O error, a lock held too long, a read-only or vanished file.
_TRANSIENT_CODES = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
}


def transient(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _TRANSIENT_CODES


def request_specific(exc: BaseException) -> bool:
    """Errors one request's content can cause (text that cannot be bound); others fail the whole batch."""
    return isinstance(exc, (sqlite3.InterfaceError, sqlite3.DataError, ValueError, OverflowError))


def as_store_error(exc: BaseException) -> BaseException:
    if isinstance(exc, (sqlite3.Error, UnicodeError, ValueError, OverflowError)):
        error = StoreError(f"session store write failed: {exc}")
        error.__cause__ = exc
        return error
    return exc
