"""The brain's pure decision: given a session's view, what happens next.

``next_action`` never performs I/O; the harness carries out what it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.brain.context import ContextCare
from agent_fleet.brain.view import SessionView, TurnGuard
from agent_fleet.domain.model import ToolCall

__all__ = ["Action", "CallModel", "Complete", "Limits", "Pause", "RunTool", "next_action"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_turns: int = 40
    # A fresh runaway guard per session (repeated identical tool calls, no progress); it is fed every
    # finished turn while the view is rebuilt, so a resumed session keeps its count.
    guard: Callable[[], TurnGuard] | None = None
    # Keeps each request inside the model's context window (trim, then compact); the log keeps everything.
    context: ContextCare = field(default_factory=ContextCare)


@dataclass(frozen=True, slots=True)
class CallModel:
    turn: int
    reissue: bool  # a request for this turn was recorded with no response (crash): send it again


@dataclass(frozen=True, slots=True)
class RunTool:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class Complete:
    summary: str
    text_result: str | None  # final text that counts as one result when nothing was submitted
    reason: str | None = None  # how it ended without ``finish`` (SessionView.finish_reason)


@dataclass(frozen=True, slots=True)
class Pause:
    reason: str


Action = CallModel | RunTool | Complete | Pause


def next_action(view: SessionView, limits: Limits) -> Action | None:
    """None when the session is already terminal."""
    if view.state.terminal:
        return None
    if view.open_calls:
        return RunTool(view.open_calls[0])
    if view.finished:
        return Complete(summary=view.finish_summary, text_result=None, reason=view.finish_reason)
    last = view.last_response
    if last is not None and not last.tool_calls:
        text = (last.content or "").strip()
        return Complete(summary=text[:500], text_result=text if view.results == 0 and text else None)
    if view.pending_turn is not None:
        return CallModel(turn=view.pending_turn, reissue=True)
    if view.trip is not None:
        return Pause(reason=view.trip.kind)
    if view.turn >= limits.max_turns:
        return Pause(reason="max_turns")
    return CallModel(turn=view.turn + 1, reissue=False)
