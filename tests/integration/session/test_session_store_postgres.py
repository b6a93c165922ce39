"""What an unreachable or missing PostgreSQL session store looks like, over the network."""

from __future__ import annotations

import os
import socket

import pytest

from agent_fleet.errors import StoreUnreachable
from agent_fleet.session import open_store

PG_URL = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.postgres
async def test_an_unreachable_postgres_is_store_unreachable_without_the_password() -> None:
    log = open_store(f"postgresql://postgres:hunter2@127.0.0.1:{_closed_port()}/test")
    with pytest.raises(StoreUnreachable) as caught:
        await log.open()
    message = str(caught.value)
    assert "hunter2" not in message
    assert "\n" not in message
    assert message.startswith("cannot reach session store postgresql://postgres:***@127.0.0.1:")
    await log.close()
    await log.close()


@pytest.mark.postgres
async def test_a_missing_postgres_database_is_store_unreachable() -> None:
    base = PG_URL.rsplit("/", 1)[0]
    log = open_store(f"{base}/no_such_database_for_fleet")
    with pytest.raises(StoreUnreachable, match="no_such_database_for_fleet"):
        await log.open()
