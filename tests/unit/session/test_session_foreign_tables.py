"""A store whose database holds other applications' tables is refused, untouched, unless allowed."""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.errors import ConfigError
from agent_fleet.session import open_store

PG = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _other_app(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()


def _tables_and_mode(path: Path) -> tuple[list[str], str]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return names, conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


async def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _other_app(path)
    before = path.read_bytes()
    log = open_store(f"sqlite:///{path}")
    with pytest.raises(ConfigError) as caught:
        await log.open()
    message = str(caught.value)
    assert message.startswith(f"session store {path} holds tables that are not the engine's (users)")
    assert message.endswith("add ?foreign_tables=allow to the store URL to share it") and "\n" not in message
    assert _untouched(path, before)


def _untouched(path: Path, before: bytes) -> bool:
    same = path.read_bytes() == before and _tables_and_mode(path) == (["users"], "delete")
    return same and not os.path.exists(f"{path}-wal")


async def test_foreign_tables_allow_shares_the_file(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _other_app(path)
    async with open_store(f"sqlite:///{path}?foreign_tables=allow") as log:
        await log.emit_event("run-a", "run_created", {})
    names, _ = _tables_and_mode(path)
    assert "users" in names and "fleet_events" in names
    # the engine's own file opens again without the option
    fresh = tmp_path / "fleet.db"
    async with open_store(f"sqlite:///{fresh}") as log:
        await log.emit_event("run-b", "run_created", {})
    async with open_store(f"sqlite:///{fresh}") as log:
        assert (await log.get_session("run-b")) is not None


def test_a_bad_foreign_tables_value_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="foreign_tables='yes': expected allow or refuse"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?foreign_tables=yes")


@pytest.mark.postgres
async def test_a_postgresql_schema_with_other_tables_is_refused_unless_allowed() -> None:
    schema = f"fleet_foreign_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(PG)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        await admin.execute(f'CREATE TABLE "{schema}".orders (id int)')
        log = open_store(f"{PG}?schema={schema}")
        with pytest.raises(ConfigError, match=r"holds tables that are not the engine's \(orders\)"):
            await log.open()
        fleet_tables = await admin.fetchval(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'fleet%'",
            schema,
        )
        assert fleet_tables == 0
        async with open_store(f"{PG}?schema={schema}&foreign_tables=allow") as shared:
            await shared.emit_event("run-c", "run_created", {})
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()
