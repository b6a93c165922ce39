"""Schema versions: a store written by the version-1 engine (tests/data/session/store_v1.*.sql, dumped
from a store that engine wrote) is brought to version 2 when it is opened, reads back as it was and
takes appends; a store of a newer version than this engine reads is refused, untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.errors import StoreError
from agent_fleet.session import SessionLog, open_store

DATA = Path(__file__).parents[2] / "data" / "session"

# (kind, run_id, state, last_seq, created_at, updated_at, info) of each stream, as version 1 held them.
V1_RECORDS = {
    "run-v1": ("run", None, SessionState.RUNNING, 2, 1700000001.0, 1700000001.0, {"task": "find bugs", "input": "src"}),
    "run-v1.s00001": (
        "agent",
        "run-v1",
        SessionState.RUNNING,
        4,
        1700000002.0,
        1700000005.0,
        {"run_id": "run-v1", "partition_id": "p1", "index": 0},
    ),
    "run-v1.s00002": (
        "agent",
        "run-v1",
        SessionState.COMPLETED,
        3,
        1700000003.0,
        1700000007.0,
        {"run_id": "run-v1", "partition_id": "p2", "index": 1},
    ),
}


async def _check_and_append(log: SessionLog) -> None:
    """The version-1 streams read back as they were; appends go on from their last seq."""
    for sid, expected in V1_RECORDS.items():
        rec = await log.get_session(sid)
        assert rec is not None
        assert (rec.kind, rec.run_id, rec.state, rec.last_seq, rec.created_at, rec.updated_at, rec.info) == expected
    assert [r.session_id for r in await log.list_sessions("run-v1")] == ["run-v1.s00001", "run-v1.s00002"]
    assert [r.session_id for r in await log.list_runs()] == ["run-v1"]
    assert [e.seq for e in await log.get_events("run-v1.s00001")] == [1, 2, 3, 4]
    assert await log.get_snapshot("admission") == {"queues": {}}
    assert (await log.emit_event("run-v1.s00001", EventType.TOOL_RESULT, {"output": "ok"})).seq == 5
    done = await log.emit_event("run-v1.s00001", EventType.SESSION_COMPLETED, {"summary": "s"})
    rec = await log.get_session("run-v1.s00001")
    assert rec is not None
    assert (rec.state, rec.last_seq, rec.updated_at, rec.created_at) == (
        SessionState.COMPLETED,
        6,
        done.time,
        1700000002.0,
    )
    assert (await log.emit_event("run-v1.s00003", EventType.SESSION_CREATED, {"run_id": "run-v1"})).seq == 1


async def test_a_version_1_sqlite_store_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((DATA / "store_v1.sqlite.sql").read_text())
    conn.close()
    async with open_store(f"sqlite:///{path}") as log:
        await _check_and_append(log)
    conn = sqlite3.connect(path)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(fleet_sessions)")]
        version = conn.execute("SELECT value FROM fleet_meta WHERE key = 'schema_version'").fetchone()[0]
        indexes = {row[1] for row in conn.execute("PRAGMA index_list(fleet_sessions)")}
    finally:
        conn.close()
    assert (columns, version) == (["session_id", "kind", "run_id", "state", "created_at"], "2")
    assert {"fleet_sessions_by_run", "fleet_sessions_by_kind"} <= indexes
    async with open_store(f"sqlite:///{path}") as again:  # opening a version-2 store changes nothing
        assert (await again.get_session("run-v1.s00001")).last_seq == 6  # type: ignore[union-attr]


async def test_a_newer_sqlite_store_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    async with open_store(f"sqlite:///{path}") as log:
        await log.emit_event("s", "x")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE fleet_meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(StoreError, match="schema version 3"):
        await open_store(f"sqlite:///{path}").open()


async def test_a_version_1_postgres_store_is_migrated_on_open(store_url: str) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("the PostgreSQL store's migration")
    dsn, _, schema = store_url.partition("?schema=")  # a fresh schema, dropped after the test
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute((DATA / "store_v1.postgres.sql").read_text().replace("fleet_store_v1", schema))
        async with open_store(store_url) as log:
            await _check_and_append(log)
        columns = await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 "
            "ORDER BY ordinal_position",
            schema,
            "fleet_sessions",
        )
        version = await conn.fetchval(f'SELECT value FROM "{schema}".fleet_meta WHERE key = $1', "schema_version")
        assert ([r[0] for r in columns], version) == (["session_id", "kind", "run_id", "state", "created_at"], "2")
        async with open_store(store_url) as again:
            assert (await again.get_session("run-v1.s00001")).last_seq == 6  # type: ignore[union-attr]
        await conn.execute(f"UPDATE \"{schema}\".fleet_meta SET value = '3' WHERE key = 'schema_version'")
        with pytest.raises(StoreError, match="schema version 3"):
            await open_store(store_url).open()
    finally:
        await conn.close()
