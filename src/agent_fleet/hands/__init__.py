"""Hands: what agents act through. Tools are called as ``execute(name, input) -> str``."""

from agent_fleet.hands.port import Hands, ToolOutput

__all__ = ["Hands", "ToolOutput"]
