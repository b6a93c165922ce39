"""The brain: a stateless harness over a pure step (state + event → actions), prompts, tool protocol.

Other planes use :mod:`agent_fleet.brain.port`; :class:`Harness` is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports
from agent_fleet.brain.port import Brain, BrainFactory, Limits, SessionView

if TYPE_CHECKING:
    from agent_fleet.brain.harness import Harness

__all__ = ["Brain", "BrainFactory", "Harness", "Limits", "SessionView"]

__getattr__ = lazy_exports(__name__, {"Harness": "agent_fleet.brain.harness"})
