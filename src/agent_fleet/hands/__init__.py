"""Hands: what agents act through. Tools are called as ``execute(name, input) -> str``.

Other planes use :mod:`agent_fleet.hands.port`; the implementations (local sandboxes, the toolbox,
CLI agents, the MCP pool, web fetching) are modules of their own, imported where they are wired.
The plane's own names are its port's.
"""

from agent_fleet.hands import port
from agent_fleet.hands.port import *  # noqa: F403

__all__ = port.__all__
