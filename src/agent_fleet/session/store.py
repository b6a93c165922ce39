"""Store URLs: which session-log backend a URL names.

``open_store(url)`` builds the backend *without connecting*; connect with ``await log.open()``
or, better, ``async with open_store(url) as log: ...`` (which also closes it).

* ``sqlite:///relative/path.db`` and ``sqlite:////absolute/path.db`` (parent dirs are created);
  option ``?sync=full`` makes every commit ``fsync`` (power-loss durability, see
  :mod:`agent_fleet.session.sqlite`), the default ``sync=normal`` survives ``kill -9``.
* Both: ``?retry_s=SECONDS`` (default 30) is how long a write or read failing for a reason that may
  pass (a dropped connection, a full disk) is retried before the run stops with exit 4, resumable.
* ``postgresql://user@host:port/db`` or ``postgres://...`` (the ``postgres`` extra); option
  ``?schema=NAME`` keeps the tables in that schema (created if missing); other query options
  go to asyncpg (``sslmode=...``) or become server settings.

The CLI default is :data:`DEFAULT_STORE_URL`, overridden by ``FLEET_STORE`` and then ``--store``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from agent_fleet.errors import ConfigError
from agent_fleet.session._codec import redact_url
from agent_fleet.session._retry import DEFAULT_DEADLINE_S
from agent_fleet.session.sqlite import SqliteSessionLog

if TYPE_CHECKING:
    from agent_fleet.session.port import SessionLog
    from agent_fleet.session.postgres import PostgresSessionLog

    def _both_backends_are_session_logs(a: SqliteSessionLog, b: PostgresSessionLog) -> tuple[SessionLog, SessionLog]:
        return a, b  # mypy checks both classes against the port here


__all__ = ["DEFAULT_STORE_URL", "STORE_ENV", "open_store", "resolve_store_url", "store_file"]

DEFAULT_STORE_URL = "sqlite:///.fleet/fleet.db"
STORE_ENV = "FLEET_STORE"
_SQLITE_OPTIONS = {"sync", "retry_s", "foreign_tables"}


def resolve_store_url(cli_value: str | None) -> str:
    """``--store`` if given, else ``$FLEET_STORE`` if set, else :data:`DEFAULT_STORE_URL`."""
    if cli_value and cli_value.strip():
        return cli_value.strip()
    from_env = os.environ.get(STORE_ENV, "").strip()
    return from_env or DEFAULT_STORE_URL


def store_file(url: str) -> Path | None:
    """The file a SQLite store URL names (None for PostgreSQL). Raises ConfigError for a bad URL."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return _sqlite_path(urlsplit(url), url) if scheme == "sqlite" else None


def open_store(url: str) -> SqliteSessionLog | PostgresSessionLog:
    """The session log a store URL names, not yet opened. Raises ConfigError for a bad URL."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url)
    raise ConfigError(
        f"unsupported store URL {redact_url(url)!r}: expected sqlite:///path/to/fleet.db or postgresql://user@host/db"
    )


def _sqlite_path(parts: SplitResult, url: str) -> Path:
    if parts.netloc or not parts.path.startswith("/") or len(parts.path) < 2:
        raise ConfigError(f"bad SQLite store URL {url!r}: write sqlite:///relative/path.db or sqlite:////abs/path.db")
    raw_path = unquote(parts.path[1:])
    if raw_path == ":memory:":
        raise ConfigError("an in-memory SQLite store cannot be shared by the writer and readers; give a file path")
    return Path(raw_path).expanduser()


def _sqlite(url: str) -> SqliteSessionLog:
    parts = urlsplit(url)
    path = _sqlite_path(parts, url)
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - _SQLITE_OPTIONS)
    if unknown:
        raise ConfigError(
            f"unknown SQLite store option(s) {', '.join(unknown)} in {url!r} (known: sync, retry_s, foreign_tables)"
        )
    sync = options.get("sync", "normal").lower()
    if sync not in ("normal", "full"):
        raise ConfigError(f"bad SQLite store option sync={sync!r}: expected normal or full")
    retry = _retry_s(options.get("retry_s"))
    foreign = _foreign_tables(options.get("foreign_tables"))
    return SqliteSessionLog(path, sync=sync, retry_deadline_s=retry, foreign_tables=foreign)


def _postgres(url: str) -> PostgresSessionLog:
    try:
        from agent_fleet.session.postgres import PostgresSessionLog
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise ConfigError("a PostgreSQL store needs asyncpg: pip install 'agent-fleet-manager[postgres]'") from None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise ConfigError(f"bad PostgreSQL store URL {redact_url(url)!r}: {exc}") from None
    options = parse_qsl(parts.query, keep_blank_values=True)
    schema = None
    retry_raw: str | None = None
    foreign_raw: str | None = None
    rest = []
    for key, value in options:
        if key == "schema":
            schema = value
        elif key == "retry_s":
            retry_raw = value
        elif key == "foreign_tables":
            foreign_raw = value
        else:
            rest.append((key, value))
    if schema is not None and not _is_identifier(schema):
        raise ConfigError(f"bad PostgreSQL store option schema={schema!r}: use letters, digits and _")
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment))
    return PostgresSessionLog(
        dsn, schema=schema, retry_deadline_s=_retry_s(retry_raw), foreign_tables=_foreign_tables(foreign_raw)
    )


def _foreign_tables(raw: str | None) -> bool:
    """Option ``foreign_tables=allow``: share a database that holds other applications' tables."""
    if raw is None or raw.lower() == "refuse":
        return False
    if raw.lower() == "allow":
        return True
    raise ConfigError(f"bad store option foreign_tables={raw!r}: expected allow or refuse")


def _retry_s(raw: str | None) -> float:
    """Option ``retry_s``: seconds a failing write is retried before the run stops (exit 4)."""
    if raw is None:
        return DEFAULT_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86_400:
        raise ConfigError(f"bad store option retry_s={raw!r}: expected seconds between 0 and 86400")
    return value


def _is_identifier(name: str) -> bool:
    # Interpolated into DDL as a quoted identifier, so only plain names are accepted.
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name) is not None
