"""Per-session figures folded from the session log, one event at a time (pure: no I/O, no clock).

The dashboard and ``/metrics`` read runs in other processes through the log alone, so what a session
has spent, how many turns it took and how close it sits to its budget are all derived from its events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.config import DEFAULT_SESSION_TOKENS
from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage

__all__ = ["DEFAULT_SESSION_TOKENS", "Budget", "SessionFigures", "budget_of_run", "used_ratio"]


@dataclass(frozen=True, slots=True)
class Budget:
    """A session's caps; ``None`` is no cap."""

    tokens: int | None = DEFAULT_SESSION_TOKENS
    usd: Decimal | None = None

    def raised(self, data: dict[str, Any]) -> Budget:
        """The caps after a ``budget_raised`` event (its values are the new caps)."""
        tokens = data.get("tokens")
        usd = data.get("usd")
        return Budget(
            tokens=int(tokens) if tokens is not None else self.tokens,
            usd=Decimal(str(usd)) if usd is not None else self.usd,
        )


def budget_of_run(options: dict[str, Any]) -> Budget:
    """The per-session caps a run started with (its stored options)."""
    tokens = options.get("budget_tokens")
    usd = options.get("budget_usd")
    return Budget(
        tokens=int(tokens) if tokens is not None else DEFAULT_SESSION_TOKENS,
        usd=Decimal(str(usd)) if usd is not None else None,
    )


def used_ratio(tokens: int, cost: Decimal, budget: Budget) -> float:
    """The share of its tightest cap a session has spent (0 when it has no cap)."""
    ratios = [0.0]
    if budget.tokens:
        ratios.append(tokens / budget.tokens)
    if budget.usd:
        ratios.append(float(cost / budget.usd))
    return max(ratios)


@dataclass(slots=True)
class SessionFigures:
    """What one agent session has done so far."""

    session_id: str
    state: str = SessionState.CREATED.value
    model: str = ""
    seen_seq: int = 0
    turns: int = 0
    tool_calls: int = 0
    calls: int = 0
    errors: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    results: int = 0
    preemptions: int = 0
    alarms: int = 0
    pause_reason: str | None = None
    budget_override: dict[str, Any] = field(default_factory=dict)  # raises recorded on this session
    last_type: str = ""
    last_time: float = 0.0

    def fold(self, ev: Event) -> None:
        """Take one event in (events arrive in ``seq`` order; one already seen is ignored)."""
        if ev.seq <= self.seen_seq:
            return
        self.seen_seq = ev.seq
        self.last_type = ev.type
        self.last_time = ev.time
        t = ev.type
        if t == EventType.SESSION_CREATED:
            self.model = str(ev.data.get("model") or "")
        elif t == EventType.MODEL_REQUEST:
            self.turns += 1
            self.model = str(ev.data.get("model") or self.model)
        elif t in (EventType.MODEL_RESPONSE, EventType.CONTEXT_COMPACTED):  # a summary call is metered too
            resp = ChatResponse.from_dict(ev.data["response"])
            self.calls += 1
            self.errors += len(resp.retried)
            self.usage = self.usage + resp.usage
            self.cost_usd += resp.cost_usd
            self.model = resp.model or self.model
        elif t in (EventType.MODEL_ERROR, EventType.ATTEMPT_FAILED):
            self.errors += 1
        elif t == EventType.TOOL_CALL:
            self.tool_calls += 1
        elif t == EventType.RESULT_ITEM:
            self.results += 1
        elif t == EventType.SESSION_PREEMPTED:
            self.preemptions += 1
        elif t == EventType.ALARM:
            self.alarms += 1
        elif t == EventType.BUDGET_RAISED:
            self.budget_override.update({k: v for k, v in ev.data.items() if k in ("tokens", "usd") and v is not None})
        if t == EventType.SESSION_PAUSED:
            self.pause_reason = str(ev.data.get("reason") or "")
        elif t in (EventType.SESSION_RESUMED, EventType.SESSION_STARTED, EventType.SESSION_ADMITTED):
            self.pause_reason = None

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens

    def budget(self, run_budget: Budget) -> Budget:
        return run_budget.raised(self.budget_override) if self.budget_override else run_budget

    def to_row(self, run_budget: Budget) -> dict[str, Any]:
        """The session's line in the run's table (JSON-able)."""
        return {
            "session_id": self.session_id,
            "state": self.state,
            "model": self.model,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "calls": self.calls,
            "errors": self.errors,
            "tokens": self.tokens,
            "cost_usd": float(self.cost_usd),
            "results": self.results,
            "preemptions": self.preemptions,
            "alarms": self.alarms,
            "pause_reason": self.pause_reason,
            "budget_used_ratio": round(used_ratio(self.tokens, self.cost_usd, self.budget(run_budget)), 4),
            "last_event": self.last_type,
            "last_time": self.last_time,
        }
