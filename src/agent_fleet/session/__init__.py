"""The session log: an append-only event store outside the brain and the hands.

Other planes use :mod:`agent_fleet.session.port`. ``open_store(url)`` picks the backend from a store
URL (see :mod:`agent_fleet.session.store`); :class:`SqliteSessionLog` is the embedded default,
:class:`PostgresSessionLog` (the ``postgres`` extra) the scale-out one. Both, and the store URLs,
are imported on first use: importing the port loads neither backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports
from agent_fleet.session.port import ForwardingLog, SessionLog, WakeState

if TYPE_CHECKING:
    from agent_fleet.session.postgres import PostgresSessionLog
    from agent_fleet.session.sqlite import SqliteSessionLog
    from agent_fleet.session.store import DEFAULT_STORE_URL, STORE_ENV, open_store, resolve_store_url

__all__ = [
    "DEFAULT_STORE_URL",
    "STORE_ENV",
    "ForwardingLog",
    "PostgresSessionLog",
    "SessionLog",
    "SqliteSessionLog",
    "WakeState",
    "open_store",
    "resolve_store_url",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "DEFAULT_STORE_URL": "agent_fleet.session.store",
        "STORE_ENV": "agent_fleet.session.store",
        "PostgresSessionLog": "agent_fleet.session.postgres",
        "SqliteSessionLog": "agent_fleet.session.sqlite",
        "open_store": "agent_fleet.session.store",
        "resolve_store_url": "agent_fleet.session.store",
    },
)
