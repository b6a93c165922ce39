"""Store URLs, the backend factory, and what an unopenable SQLite store looks like (PostgreSQL over the
network: tests/integration/session/test_session_store_postgres.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.errors import ConfigError, StoreError, StoreUnreachable
from agent_fleet.session import (
    DEFAULT_STORE_URL,
    PostgresSessionLog,
    SqliteSessionLog,
    open_store,
    resolve_store_url,
)
from agent_fleet.session._codec import redact_url


def test_resolve_store_url_prefers_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_STORE", raising=False)
    assert resolve_store_url(None) == DEFAULT_STORE_URL == "sqlite:///.fleet/fleet.db"
    monkeypatch.setenv("FLEET_STORE", "postgresql://db/fleet")
    assert resolve_store_url(None) == "postgresql://db/fleet"
    assert resolve_store_url("") == "postgresql://db/fleet"
    assert resolve_store_url("sqlite:///x.db") == "sqlite:///x.db"
    monkeypatch.setenv("FLEET_STORE", "  ")
    assert resolve_store_url(None) == DEFAULT_STORE_URL


def test_sqlite_urls_name_relative_and_absolute_paths() -> None:
    relative = open_store("sqlite:///.fleet/fleet.db")
    assert isinstance(relative, SqliteSessionLog)
    assert relative.path == Path(".fleet/fleet.db")
    assert (relative.sync, open_store("sqlite:///a.db?sync=full").sync) == ("normal", "full")  # type: ignore[union-attr]
    absolute = open_store("sqlite:////tmp/some%20dir/fleet.db")
    assert isinstance(absolute, SqliteSessionLog)
    assert absolute.path == Path("/tmp/some dir/fleet.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db/x", "unsupported store URL"),
        (".fleet/fleet.db", "unsupported store URL"),
        ("sqlite://relative.db", "bad SQLite store URL"),
        ("sqlite:///", "bad SQLite store URL"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite:///x.db?sync=sometimes", "sync='sometimes'"),
        ("sqlite:///x.db?journal=off", "unknown SQLite store option"),
        ("postgresql://db/x?schema=bad;name", "schema="),
        ("postgresql://db:notaport/x", "bad PostgreSQL store URL"),
    ],
)
def test_bad_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_store(url)


def test_postgres_urls_carry_the_schema_separately() -> None:
    for scheme in ("postgresql", "postgres"):
        log = open_store(f"{scheme}://u:secret@db:5433/fleet?schema=team_a&sslmode=disable")
        assert isinstance(log, PostgresSessionLog)
        assert log.schema == "team_a"
        assert "secret" not in repr(log)
        assert "sslmode=disable" in log._dsn and "schema" not in log._dsn


def test_a_config_error_never_shows_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        open_store("mysql://user:hunter2@db/x")
    assert "hunter2" not in str(caught.value)
    assert redact_url("postgresql://user:hunter2@db:5432/x?a=1") == "postgresql://user:***@db:5432/x?a=1"
    assert redact_url("postgresql://db/x") == "postgresql://db/x"


async def test_an_unopenable_sqlite_file_is_store_unreachable(tmp_path: Path) -> None:
    (tmp_path / "a-directory.db").mkdir()
    with pytest.raises(StoreUnreachable, match="cannot open session store"):
        await open_store(f"sqlite:///{tmp_path / 'a-directory.db'}").open()
    (tmp_path / "not-a-db.db").write_bytes(b"this is not a database file at all" * 100)
    with pytest.raises(StoreUnreachable, match="not a database"):
        await open_store(f"sqlite:///{tmp_path / 'not-a-db.db'}").open()
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreUnreachable, match="cannot open session store"):
        await open_store(f"sqlite:///{tmp_path / 'file' / 'below-a-file.db'}").open()


async def test_sqlite_creates_parent_directories(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'a' / 'b' / 'fleet.db'}") as log:
        assert (await log.emit_event("s", "x")).seq == 1
    assert (tmp_path / "a" / "b" / "fleet.db").is_file()


async def test_a_store_is_not_reopened_after_close(tmp_path: Path) -> None:
    log = open_store(f"sqlite:///{tmp_path / 'fleet.db'}")
    with pytest.raises(StoreError, match="not open"):
        await log.emit_event("s", "x")
    await log.open()
    await log.close()
    with pytest.raises(StoreError, match="cannot be reopened"):
        await log.open()
