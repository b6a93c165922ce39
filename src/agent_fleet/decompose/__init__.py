"""Decompose: task + input → a plan of exclusive partitions, one agent session per leaf.

Inputs: a directory (a codebase: its text files, honouring .gitignore), a ``.txt`` (or any other) file with one
item per line, a ``.jsonl`` file with one JSON record per line, a ``.csv`` file with a header row, or nothing.

Every name is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports

if TYPE_CHECKING:
    from agent_fleet.decompose.decompose_options import DecomposeOptions, estimate_tokens
    from agent_fleet.decompose.planner import DIRECTORY_TOOLS, URL_TOOLS, decompose, plan_source
    from agent_fleet.decompose.read import read_items
    from agent_fleet.decompose.source import InputSource

__all__ = [
    "DIRECTORY_TOOLS",
    "URL_TOOLS",
    "DecomposeOptions",
    "InputSource",
    "decompose",
    "estimate_tokens",
    "plan_source",
    "read_items",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "DIRECTORY_TOOLS": "agent_fleet.decompose.planner",
        "URL_TOOLS": "agent_fleet.decompose.planner",
        "DecomposeOptions": "agent_fleet.decompose.decompose_options",
        "InputSource": "agent_fleet.decompose.source",
        "decompose": "agent_fleet.decompose.planner",
        "estimate_tokens": "agent_fleet.decompose.decompose_options",
        "plan_source": "agent_fleet.decompose.planner",
        "read_items": "agent_fleet.decompose.read",
    },
)
