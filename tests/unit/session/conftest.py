"""Fixtures running every session-log test against SQLite (in tmp_path), PostgreSQL and the
in-memory log that ships for tests (:mod:`agent_fleet.session.memory`).

PostgreSQL tests use a fresh schema per test, so parallel runs never share tables. They fail,
not skip, when the server is down: CI has one.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.session import SessionLog, open_store
from agent_fleet.session.memory import MemorySessionLog, MemoryStore

PG_URL = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

OpenLog = Callable[[], Awaitable[SessionLog]]


def unique_schema() -> str:
    return f"fleet_t{os.getpid()}_{secrets.token_hex(4)}"


async def drop_schema(schema: str) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


MEMORY = "memory:"  # this test's MemoryStore


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "memory"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "memory":
        yield MEMORY
        return
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store' / 'fleet.db'}"
        return
    schema = unique_schema()
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        await drop_schema(schema)


@pytest.fixture
async def open_log(store_url: str) -> AsyncIterator[OpenLog]:
    """Opens as many logs on the test's store as a test wants; all are closed afterwards."""
    opened: list[SessionLog] = []
    memory = MemoryStore()

    async def factory() -> SessionLog:
        log: SessionLog = MemorySessionLog(memory) if store_url == MEMORY else open_store(store_url)
        await log.open()
        opened.append(log)
        return log

    yield factory
    for log in opened:
        await log.close()


@pytest.fixture
async def log(open_log: OpenLog) -> SessionLog:
    return await open_log()
