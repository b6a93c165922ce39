"""Hands: what agents act through. Tools are called as ``execute(name, input) -> str``.

Other planes use :mod:`agent_fleet.hands.port`; the implementations (local sandboxes, the toolbox,
CLI agents, the MCP pool, web fetching) are modules of their own, imported where they are wired.
"""

from agent_fleet.hands.port import (
    CliAgent,
    CliOutcome,
    CompletedRun,
    GatewayAccess,
    Hands,
    ResourceSpec,
    Sandbox,
    SandboxProvider,
    SandboxState,
    ToolOutput,
)

__all__ = [
    "CliAgent",
    "CliOutcome",
    "CompletedRun",
    "GatewayAccess",
    "Hands",
    "ResourceSpec",
    "Sandbox",
    "SandboxProvider",
    "SandboxState",
    "ToolOutput",
]
