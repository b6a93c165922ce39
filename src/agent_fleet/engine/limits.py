"""What bounds one agent session: its turns, the runaway guard and context care (fleet.yaml)."""

from __future__ import annotations

from agent_fleet.brain.context import ContextCare
from agent_fleet.brain.step import Limits
from agent_fleet.config import FleetConfig
from agent_fleet.options import RunOptions
from agent_fleet.spend.factory import price_table
from agent_fleet.spend.guards import RunawayGuard

__all__ = ["session_limits"]


def session_limits(options: RunOptions, config: FleetConfig) -> Limits:
    """Per-session limits: max turns, the runaway guard of fleet.yaml ``guards``, its context care."""
    guards = config.guards
    max_turns = options.max_turns or guards.max_turns

    def guard() -> RunawayGuard:
        return RunawayGuard(
            max_turns=max_turns,
            repeated_tool_calls=guards.repeated_tool_calls,
            no_progress_turns=guards.no_progress_turns,
        )

    ctx = config.context
    care = ContextCare(
        enabled=ctx.care,
        window=price_table(config).context_window,
        threshold=ctx.threshold,
        keep_turns=ctx.keep_turns,
        summary_tokens=ctx.summary_tokens,
        trim_step=ctx.trim_step,
    )
    return Limits(max_turns=max_turns, guard=guard, context=care)
