"""Opening the SQLite session log's file (sqlite.py): the connection pragmas, the schema, the foreign-table check.

The writer's connection sets the page size (on a new file only), WAL mode and the ``synchronous``
level the store URL asked for; the reader's is ``query_only``. Both wait ``busy_timeout`` for
another process's writer. The schema is created in one ``BEGIN IMMEDIATE`` transaction, a file
written by an older schema version is brought up to this one in the same transaction, and a file
written by a newer one is refused. A file holding other applications' tables is refused before
anything is written to it, WAL mode included, unless the store was told it may share the file.

Schema versions: 1 rewrote each session's projection row (its ``last_seq`` and ``updated_at``) in
every batch that appended to it; 2 keeps in that row only what changes now and then, and reads a
session's last ``seq`` and last event time from its newest event. Opening a version-1 file rebuilds
``fleet_sessions`` without those two columns (:func:`_v1_to_v2`); the events are untouched. An
engine that reads version 1 refuses a version-2 file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent_fleet.errors import ConfigError, StoreError, StoreUnreachable
from agent_fleet.session._codec import foreign_tables_message
from agent_fleet.session._sqlite_lease import LEASE_SCHEMA
from agent_fleet.session._sqlite_rows import SCHEMA, SESSIONS_INDEXES, SESSIONS_TABLE

__all__ = [
    "FOREIGN_TABLES",
    "PAGE_SIZE",
    "SCHEMA_VERSION",
    "SYNC_MODES",
    "check_foreign_tables",
    "connect",
    "create_schema",
]

SCHEMA_VERSION = 2

# Measured with 1,000 sessions appending at once: 32 KiB pages write ~2x faster than 4 KiB ones
# (fewer WAL frames and B-tree pages per batch, and the ~1,000-page automatic checkpoint comes
# 8x less often), while waking a session stays well under a millisecond.
PAGE_SIZE = 32768

SYNC_MODES = {"normal": "NORMAL", "full": "FULL"}
FOREIGN_TABLES = (
    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
    "AND name NOT LIKE 'fleet\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
)


def check_foreign_tables(path: Path, busy_timeout_s: float) -> None:
    """Refuse (before anything is written, WAL mode included) a file holding other tables."""
    if not path.exists():
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s)
        try:
            names = [row[0] for row in conn.execute(FOREIGN_TABLES)]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreUnreachable(f"cannot open session store {path}: {exc}") from None
    if names:
        raise ConfigError(foreign_tables_message(str(path), names))


def connect(path: Path, *, reader: bool, busy_timeout_s: float, sync: str) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(
            path,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=not reader,
        )
    except sqlite3.Error as exc:
        raise StoreUnreachable(f"cannot open session store {path}: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        if reader:
            conn.execute("PRAGMA query_only = 1")
        else:
            # Takes effect only on a new, empty file (before WAL mode is set); see PAGE_SIZE.
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {SYNC_MODES[sync]}")
        conn.execute("PRAGMA cache_size = -32000")
    except sqlite3.Error as exc:
        conn.close()
        raise StoreUnreachable(f"cannot open session store {path}: {exc}") from None
    return conn


def create_schema(conn: sqlite3.Connection, path: Path) -> None:
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in (SCHEMA + ";" + LEASE_SCHEMA).split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM fleet_meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO fleet_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"session store {path} has schema version {row[0]}; this version reads {SCHEMA_VERSION}"
                )
            elif int(row[0]) < SCHEMA_VERSION:
                for version in range(int(row[0]), SCHEMA_VERSION):
                    _MIGRATIONS[version](conn)
                conn.execute("UPDATE fleet_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        conn.close()
        raise StoreUnreachable(f"cannot open session store {path}: {exc}") from None


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """``fleet_sessions`` without ``last_seq`` and ``updated_at`` (read from the newest event since)."""
    conn.execute(SESSIONS_TABLE.replace("fleet_sessions", "fleet_sessions_v2"))
    conn.execute(
        "INSERT INTO fleet_sessions_v2 (session_id, kind, run_id, state, created_at) "
        "SELECT session_id, kind, run_id, state, created_at FROM fleet_sessions"
    )
    conn.execute("DROP TABLE fleet_sessions")  # and its indexes
    conn.execute("ALTER TABLE fleet_sessions_v2 RENAME TO fleet_sessions")
    for statement in SESSIONS_INDEXES.split(";"):
        if statement.strip():
            conn.execute(statement)


_MIGRATIONS = {1: _v1_to_v2}  # version -> the step to the next one, in the open's transaction
