"""The session log: an append-only event store outside the brain and the hands.

``open_store(url)`` picks the backend from a store URL (see :mod:`agent_fleet.session.store`);
:class:`SqliteSessionLog` is the embedded default, :class:`PostgresSessionLog` (imported
lazily, it needs the ``postgres`` extra) the scale-out one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_fleet.session.port import SessionLog, WakeState
from agent_fleet.session.sqlite import SqliteSessionLog
from agent_fleet.session.store import DEFAULT_STORE_URL, STORE_ENV, open_store, resolve_store_url

if TYPE_CHECKING:
    from agent_fleet.session.postgres import PostgresSessionLog

__all__ = [
    "DEFAULT_STORE_URL",
    "STORE_ENV",
    "PostgresSessionLog",
    "SessionLog",
    "SqliteSessionLog",
    "WakeState",
    "open_store",
    "resolve_store_url",
]


def __getattr__(name: str) -> Any:
    # asyncpg is optional: import the PostgreSQL backend only when it is asked for.
    if name == "PostgresSessionLog":
        from agent_fleet.session.postgres import PostgresSessionLog

        return PostgresSessionLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
