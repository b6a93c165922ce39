"""The ledger: every figure of spend and work, folded from the session log in one place (pure).

:class:`SessionLedger` folds one agent session's events (or, added up, all a run's sessions'):
metered calls and their tokens and list-price cost, the sends charged as re-sent, errors, turns, tool
calls and results. :class:`RunLedger` adds the run's own stream (the planner's call, verifier calls,
provider embeddings), the sessions' states and the figures per model. The run summary, ``status``,
the dashboard, the harness's view of a session, the forecasts, verification and the spend tallies all
read these, so a figure is computed here and nowhere else.

``usage``/``cost_usd``/``calls`` are the metered answers (a context summary is a call too). ``resent``
are the sends a crash or a timeout left without a recorded answer, each charged at its reservation
(``model_resent``): the provider may have answered and billed them, so its bill is at most the two
together. ``errors`` counts failed model-call attempts by
:class:`~agent_fleet.domain.error_kinds.ErrorKind`: the ``retried`` kinds of answers and of failed calls
and each failed call's own kind — exactly what the gateway's meter counts — and the attempts that hit
the session's own timeout (``attempt_failed`` kind ``timeout``), which the meter never sees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.attempts import AttemptKind
from agent_fleet.domain.decode import decode
from agent_fleet.domain.error_kinds import ErrorKind, recorded_kind
from agent_fleet.domain.events import Event, SessionRecord, SessionState
from agent_fleet.domain.payloads import (
    AttemptFailed,
    Calls,
    ContextCompacted,
    Embeddings,
    ModelError,
    ModelRequest,
    ModelResent,
    ModelResponse,
    Planned,
    ResultRecorded,
    SessionCreated,
    ToolCalled,
    ToolResult,
    Verification,
)
from agent_fleet.domain.usage import Usage

__all__ = ["RunLedger", "SessionLedger", "Tally", "run_calls"]


@dataclass(slots=True)
class Tally:
    """Calls, their tokens and their list-price cost."""

    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    calls: int = 0

    def add(self, usage: Usage, cost: Decimal, calls: int = 1) -> None:
        self.usage = self.usage + usage
        self.cost_usd += cost
        self.calls += calls


def run_calls(ev: Event) -> Calls | None:
    """The model calls an event of a run's own stream records: provider embeddings, verifier calls,
    the planner's call; None for any other event."""
    p = decode(ev)
    if isinstance(p, Embeddings | Verification):
        return p.spent
    if isinstance(p, Planned):
        return p.planner
    return None


def _failed_kinds(p: ModelError) -> tuple[object, ...]:
    """The attempts retried before the call failed, then the one that ended it."""
    return (*p.retried, p.kind)


@dataclass(slots=True)
class SessionLedger:
    """What agent sessions have done: fold their events in ``seq`` order (:meth:`fold`)."""

    model: str = ""  # the model the session was given, else the one its latest answer names
    turns: int = 0  # turns asked (a turn sent again is still one turn)
    tool_calls: int = 0
    metered: Tally = field(default_factory=Tally)
    resent: Tally = field(default_factory=Tally)
    retried: int = 0  # attempts retried before an answer came
    failed_calls: int = 0  # model calls that ended in an error
    failed_attempts: int = 0  # attempts of the session that failed (any kind)
    errors: Counter[str] = field(default_factory=Counter)
    results: int = 0
    refused: int = 0  # submit_result calls refused (empty, markup only, confidence out of range …)

    @property
    def usage(self) -> Usage:
        return self.metered.usage

    @property
    def cost_usd(self) -> Decimal:
        return self.metered.cost_usd

    @property
    def calls(self) -> int:
        return self.metered.calls

    @property
    def spent(self) -> tuple[Usage, Decimal]:
        """What a session's budget holds: the metered answers plus the sends charged as re-sent."""
        return self.metered.usage + self.resent.usage, self.metered.cost_usd + self.resent.cost_usd

    @property
    def call_errors(self) -> int:
        """Failed attempts as the dashboard counts them: retried ones, failed calls, failed attempts."""
        return self.retried + self.failed_calls + self.failed_attempts

    def fold(self, ev: Event) -> None:
        p = decode(ev)
        if isinstance(p, SessionCreated):
            self.model = p.model
        elif isinstance(p, ModelRequest):
            self.turns += not p.again
            self.model = p.model or self.model
        elif isinstance(p, ModelResponse | ContextCompacted):
            resp = p.response
            self.metered.add(resp.usage, resp.cost_usd)
            self.model = resp.model or self.model
            self.retried += len(resp.retried)
            self._count(resp.retried)
        elif isinstance(p, ModelResent):
            self.resent.add(p.usage, p.cost_usd)
        elif isinstance(p, ModelError):
            self.failed_calls += 1
            self._count(_failed_kinds(p))
        elif isinstance(p, AttemptFailed):
            self.failed_attempts += 1
            if p.kind == AttemptKind.TIMEOUT:
                self.errors[ErrorKind.TIMEOUT] += 1
        elif isinstance(p, ToolCalled):
            self.tool_calls += 1
        elif isinstance(p, ResultRecorded):
            self.results += 1
        elif isinstance(p, ToolResult) and p.name == "submit_result" and p.is_error:
            self.refused += 1  # returned to the model as an error it can fix

    def fold_all(self, events: Iterable[Event]) -> SessionLedger:
        for ev in events:
            self.fold(ev)
        return self

    def _count(self, kinds: Sequence[object]) -> None:
        for value in kinds:
            self.errors[recorded_kind(value)] += 1


@dataclass(slots=True)
class RunLedger:
    """A run's figures: its agent sessions' events (:meth:`fold`), its own stream's
    (:meth:`fold_run`) and its sessions' states (:meth:`count_sessions`)."""

    agents: SessionLedger = field(default_factory=SessionLedger)  # every agent session, added up
    own_calls: Tally = field(default_factory=Tally)  # planner, verifier, provider embeddings
    run_resent: Tally = field(default_factory=Tally)  # the planner's sends charged as re-sent
    run_errors: Counter[str] = field(default_factory=Counter)  # the planner's failed attempts
    sessions: Counter[str] = field(default_factory=Counter)
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, sessions: Sequence[SessionRecord], events: Iterable[Event], run_events: Iterable[Event] = ()
    ) -> RunLedger:
        ledger = cls()
        for ev in run_events:
            ledger.fold_run(ev)
        ledger.count_sessions(sessions)
        for ev in events:
            ledger.fold(ev)
        return ledger

    # -- the figures ----------------------------------------------------------------------------
    @property
    def usage(self) -> Usage:
        return self.own_calls.usage + self.agents.usage

    @property
    def cost_usd(self) -> Decimal:
        return self.own_calls.cost_usd + self.agents.cost_usd

    @property
    def llm_calls(self) -> int:
        return self.own_calls.calls + self.agents.calls

    @property
    def llm_calls_resent(self) -> int:
        return self.run_resent.calls + self.agents.resent.calls

    @property
    def usage_resent(self) -> Usage:
        return self.run_resent.usage + self.agents.resent.usage

    @property
    def cost_usd_resent(self) -> Decimal:
        return self.run_resent.cost_usd + self.agents.resent.cost_usd

    @property
    def errors(self) -> Counter[str]:
        return self.run_errors + self.agents.errors

    @property
    def spent(self) -> tuple[Usage, Decimal]:
        """What the run's budgets hold: the metered calls plus the sends charged as re-sent."""
        return self.usage + self.usage_resent, self.cost_usd + self.cost_usd_resent

    @property
    def results_raw(self) -> int:
        return self.agents.results

    @property
    def results_refused(self) -> int:
        return self.agents.refused

    # -- the fold -------------------------------------------------------------------------------
    def count_sessions(self, sessions: Iterable[SessionRecord]) -> None:
        for rec in sessions:
            self.sessions[rec.state] += 1

    def fold_run(self, ev: Event) -> None:
        """One event of the run's own stream."""
        calls = run_calls(ev)
        p = decode(ev)
        if calls is not None:
            self.own_calls.add(calls.usage, calls.cost_usd, calls.calls)
            m = self._model_row(calls.model or "unknown")
            m["calls"] += calls.calls
            _add_usage(m, calls.usage, calls.cost_usd)
        elif isinstance(p, ModelResent) and p.planner:  # a planner's call that timed out
            self.run_resent.add(p.usage, p.cost_usd)
        elif isinstance(p, ModelError) and p.planner:  # a planner's call that failed
            self._count_errors(self.run_errors, self._model_row(p.model or "unknown"), _failed_kinds(p))

    def fold(self, ev: Event) -> None:
        """One event of one of the run's agent sessions."""
        self.agents.fold(ev)
        p = decode(ev)
        if isinstance(p, ModelResponse | ContextCompacted):
            resp = p.response
            m = self._model_row(resp.model or "unknown")
            self._count_errors(None, m, resp.retried)
            m["calls"] += 1
            _add_usage(m, resp.usage, resp.cost_usd)
        elif isinstance(p, ModelError):
            self._count_errors(None, self._model_row(p.model or "unknown"), _failed_kinds(p))

    def to_summary(self) -> dict[str, Any]:
        """The figures as the run's summary and ``status`` show them (JSON-able)."""
        usage, resent, errors = self.usage, self.usage_resent, self.errors
        main = (SessionState.COMPLETED, SessionState.FAILED, SessionState.PAUSED)
        return {
            "sessions": {
                "completed": self.sessions.get(SessionState.COMPLETED, 0),
                "failed": self.sessions.get(SessionState.FAILED, 0),
                "paused": self.sessions.get(SessionState.PAUSED, 0),
                "other": sum(n for s, n in self.sessions.items() if s not in main),
            },
            "results_raw": self.results_raw,
            "results_refused": self.results_refused,
            "tokens": {
                "input": usage.input_tokens,
                "output": usage.output_tokens,
                "cached_input": usage.cached_input_tokens,
                "total": usage.total_tokens,
            },
            "cost_usd": float(self.cost_usd),
            "cost_usd_exact": str(self.cost_usd),
            "llm_calls": self.llm_calls,
            "llm_calls_resent": self.llm_calls_resent,
            "tokens_resent": {
                "input": resent.input_tokens,
                "output": resent.output_tokens,
                "total": resent.total_tokens,
            },
            "cost_usd_resent": str(self.cost_usd_resent),
            # every kind, zero included: the same keys as the meter and the fleet_llm_requests metric
            "errors": {str(k): errors.get(k, 0) for k in ErrorKind},
            "per_model": self.per_model,
        }

    def _model_row(self, model: str) -> dict[str, Any]:
        row = {"calls": 0, "tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
        return self.per_model.setdefault(model, {**row, "cost_usd": "0", "errors": {}})

    @staticmethod
    def _count_errors(total: Counter[str] | None, row: dict[str, Any], kinds: Sequence[object]) -> None:
        for value in kinds:
            kind = str(recorded_kind(value))
            if total is not None:
                total[kind] += 1
            row["errors"][kind] = row["errors"].get(kind, 0) + 1


def _add_usage(row: dict[str, Any], usage: Usage, cost: Decimal) -> None:
    row["tokens"] += usage.total_tokens
    row["input_tokens"] += usage.input_tokens
    row["output_tokens"] += usage.output_tokens
    row["cached_input_tokens"] += usage.cached_input_tokens
    row["cost_usd"] = str(Decimal(row["cost_usd"]) + cost)
