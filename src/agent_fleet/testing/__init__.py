"""Public test helpers: fakes for the engine's ports and a virtual clock.

* :class:`FakeProvider`, :class:`FakeGateway`, :class:`FakeHands` (:mod:`agent_fleet.testing.fakes`);
* :class:`MemorySessionLog` (:mod:`agent_fleet.session.memory`), which passes the session-log
  contract suite;
* :class:`VirtualClock` (:mod:`agent_fleet.clock`): exact time, moved by hand or, inside
  ``auto_advance()``, whenever every task waits;
* the simulated provider is its own package, :mod:`agent_fleet.sim` (``agent-fleet sim-provider``);
  :mod:`agent_fleet.testing.sim_provider` re-exports it.

Names load on first use, so importing this package costs nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_fleet.clock import VirtualClock
    from agent_fleet.session.memory import MemorySessionLog, MemoryStore
    from agent_fleet.testing.fakes import FakeGateway, FakeHands, FakeProvider

__all__ = ["FakeGateway", "FakeHands", "FakeProvider", "MemorySessionLog", "MemoryStore", "VirtualClock"]

_HOMES = {
    "FakeGateway": "agent_fleet.testing.fakes",
    "FakeHands": "agent_fleet.testing.fakes",
    "FakeProvider": "agent_fleet.testing.fakes",
    "MemorySessionLog": "agent_fleet.session.memory",
    "MemoryStore": "agent_fleet.session.memory",
    "VirtualClock": "agent_fleet.clock",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)
