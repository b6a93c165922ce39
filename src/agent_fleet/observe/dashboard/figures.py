"""Per-session figures folded from the session log, one event at a time (pure: no I/O, no clock).

The dashboard and ``/metrics`` read runs in other processes through the log alone, so what a session
has spent, how many turns it took and how close it sits to its budget are all derived from its events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.config import DEFAULT_SESSION_TOKENS
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.domain.ledger import SessionLedger
from agent_fleet.domain.payloads import (
    Alarm,
    BudgetRaised,
    ChangeRecorded,
    Check,
    SessionPaused,
    SessionPreempted,
)
from agent_fleet.domain.usage import Usage

__all__ = ["DEFAULT_SESSION_TOKENS", "Budget", "SessionFigures", "budget_of_run", "used_ratio"]


@dataclass(frozen=True, slots=True)
class Budget:
    """A session's caps; ``None`` is no cap."""

    tokens: int | None = DEFAULT_SESSION_TOKENS
    usd: Decimal | None = None

    def raised(self, tokens: int | None = None, usd: Decimal | None = None) -> Budget:
        """The caps after a ``budget_raised`` event (its values are the new caps; None: unchanged)."""
        return Budget(
            tokens=tokens if tokens is not None else self.tokens,
            usd=usd if usd is not None else self.usd,
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
    """What one agent session has done so far: its ledger, and what the dashboard shows beside it."""

    session_id: str
    state: str = SessionState.CREATED.value
    seen_seq: int = 0
    ledger: SessionLedger = field(default_factory=SessionLedger)
    preemptions: int = 0
    alarms: int = 0
    changed_files: int | None = None  # the files its recorded change touched (None: no change)
    pause_reason: str | None = None
    raised_tokens: int | None = None  # the caps raises recorded on this session set (None: the run's)
    raised_usd: Decimal | None = None
    last_type: str = ""
    last_time: float = 0.0
    check: dict[str, Any] | None = None  # its change's check (the ``check`` event's record), once recorded

    def fold(self, ev: Event) -> None:
        """Take one event in (events arrive in ``seq`` order; one already seen is ignored)."""
        if ev.seq <= self.seen_seq:
            return
        self.seen_seq = ev.seq
        self.last_type = ev.type
        self.last_time = ev.time
        self.ledger.fold(ev)
        p = decode(ev)
        if isinstance(p, SessionPreempted):
            self.preemptions += 1
        elif isinstance(p, Alarm):
            self.alarms += 1
        elif isinstance(p, Check):
            self.check = dict(p.record)
        elif isinstance(p, ChangeRecorded):
            self.changed_files = p.files
        elif isinstance(p, BudgetRaised):
            self.raised_tokens = p.tokens if p.tokens is not None else self.raised_tokens
            self.raised_usd = p.usd if p.usd is not None else self.raised_usd
        if isinstance(p, SessionPaused):
            self.pause_reason = p.reason or ""
        elif ev.type in (EventType.SESSION_RESUMED, EventType.SESSION_STARTED):
            self.pause_reason = None

    @property
    def model(self) -> str:
        return self.ledger.model

    @property
    def turns(self) -> int:
        return self.ledger.turns

    @property
    def tool_calls(self) -> int:
        return self.ledger.tool_calls

    @property
    def calls(self) -> int:
        return self.ledger.calls

    @property
    def errors(self) -> int:
        return self.ledger.call_errors

    @property
    def usage(self) -> Usage:
        return self.ledger.usage

    @property
    def cost_usd(self) -> Decimal:
        return self.ledger.cost_usd

    @property
    def results(self) -> int:
        return self.ledger.results

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens

    def budget(self, run_budget: Budget) -> Budget:
        return run_budget.raised(self.raised_tokens, self.raised_usd)

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
            "changed_files": self.changed_files,
            "pause_reason": self.pause_reason,
            "budget_used_ratio": round(used_ratio(self.tokens, self.cost_usd, self.budget(run_budget)), 4),
            "last_event": self.last_type,
            "last_time": self.last_time,
            "check": None if self.check is None else self.check.get("outcome"),
        }
