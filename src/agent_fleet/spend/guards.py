"""Runaway guards: stop a session that spends without getting anywhere, before its budget does.

Pure and replayable: feed each finished turn (the tool calls the model made, and whether the turn
produced something) and get back ``None`` or a :class:`GuardTrip` — the engine then pauses the
session with ``reason = trip.kind`` (``max_turns``, ``repeated_tool_call``, ``no_progress``).

* ``max_turns``: the session has had that many model turns.
* ``repeated_tool_call``: the same tool with the same arguments, that many turns in a row. Calls are
  compared by their meaning (:func:`normalised_arguments`): the same JSON spaced or ordered otherwise is
  the same call.
* ``no_progress``: that many turns in a row with neither a result nor a tool call not seen before; a call
  refused for its arguments (never run) is no new call, however it varies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["GuardTrip", "RunawayGuard", "normalised_arguments"]


def normalised_arguments(arguments: str) -> str:
    """A tool call's arguments by their meaning: JSON re-written with sorted keys and no spacing;
    text that is not JSON with its runs of whitespace made one space."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return " ".join(arguments.split())


@dataclass(frozen=True, slots=True)
class GuardTrip:
    kind: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.kind, "message": self.message}


@dataclass(slots=True)
class RunawayGuard:
    max_turns: int = 60
    repeated_tool_calls: int = 5
    no_progress_turns: int = 12
    turns: int = 0
    _last: frozenset[tuple[str, str]] | None = None
    _repeats: int = 0
    _idle: int = 0
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def observe_turn(
        self,
        tool_calls: Iterable[tuple[str, str]],
        *,
        produced: bool = False,
        refused: Iterable[tuple[str, str]] = (),
    ) -> GuardTrip | None:
        """One finished model turn: its ``(tool name, arguments JSON)`` calls; ``produced``: a result came;
        ``refused``: those of its calls refused for their arguments (they repeat, but are no progress)."""
        calls = frozenset((name, normalised_arguments(args)) for name, args in tool_calls)
        ran = calls - {(name, normalised_arguments(args)) for name, args in refused}
        self.turns += 1
        if calls and calls == self._last:
            self._repeats += 1
        else:
            self._repeats = 1 if calls else 0
        self._last = calls or None
        fresh = bool(ran - self._seen)
        self._seen |= ran
        self._idle = 0 if (produced or fresh) else self._idle + 1
        if self._repeats >= self.repeated_tool_calls:
            name = sorted(calls)[0][0]
            return GuardTrip(
                "repeated_tool_call", f"{name} called with the same arguments {self._repeats} turns in a row"
            )
        if self._idle >= self.no_progress_turns:
            return GuardTrip("no_progress", f"no result and no new tool call for {self._idle} turns")
        if self.turns >= self.max_turns:
            return GuardTrip("max_turns", f"reached the limit of {self.max_turns} turns")
        return None
