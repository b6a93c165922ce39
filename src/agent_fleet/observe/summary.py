"""Run figures computed from the session log alone, so the summary always equals what the log holds.

``tokens`` are the metered answers. ``llm_calls_resent``/``tokens_resent`` are the sends a crash left
without a recorded answer, each charged at its reservation (``model_resent``) before it was sent again:
the provider may have answered and billed them, so its bill is at most ``tokens`` + ``tokens_resent``.

``errors`` counts failed model-call attempts by :class:`~agent_fleet.domain.errors.ErrorKind`, from
the ``retried`` kinds of ``model_response`` and ``model_error`` events and each ``model_error``'s own
``kind``: exactly what the gateway's meter counted. ``timeout`` also counts the attempts that hit
the session's own timeout (``attempt_failed`` kind ``timeout``), as it always has: those the meter
never sees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agent_fleet.domain.attempts import AttemptKind
from agent_fleet.domain.errors import ErrorKind, recorded_kind
from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage

if TYPE_CHECKING:
    from agent_fleet.session.port import SessionLog

__all__ = ["RunFigures", "read_run_figures", "run_figures"]

# The agent-session events :func:`run_figures` reads (:func:`read_run_figures` fetches only these).
_FIGURE_EVENTS = [
    EventType.MODEL_RESPONSE,
    EventType.CONTEXT_COMPACTED,
    EventType.MODEL_RESENT,
    EventType.MODEL_ERROR,
    EventType.RESULT_ITEM,
    EventType.ATTEMPT_FAILED,
]


@dataclass(slots=True)
class RunFigures:
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    llm_calls: int = 0
    # sends of unknown fate (a crash lost their answer) charged at their reservation before being sent again
    llm_calls_resent: int = 0
    usage_resent: Usage = field(default_factory=Usage)
    cost_usd_resent: Decimal = Decimal(0)
    errors: Counter[str] = field(default_factory=Counter)
    results_raw: int = 0
    sessions: Counter[str] = field(default_factory=Counter)
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_summary(self) -> dict[str, Any]:
        return {
            "sessions": {
                "completed": self.sessions.get(SessionState.COMPLETED, 0),
                "failed": self.sessions.get(SessionState.FAILED, 0),
                "paused": self.sessions.get(SessionState.PAUSED, 0),
                "other": sum(
                    n
                    for s, n in self.sessions.items()
                    if s not in (SessionState.COMPLETED, SessionState.FAILED, SessionState.PAUSED)
                ),
            },
            "results_raw": self.results_raw,
            "tokens": {
                "input": self.usage.input_tokens,
                "output": self.usage.output_tokens,
                "cached_input": self.usage.cached_input_tokens,
                "total": self.usage.total_tokens,
            },
            "cost_usd": float(self.cost_usd),
            "cost_usd_exact": str(self.cost_usd),
            "llm_calls": self.llm_calls,
            "llm_calls_resent": self.llm_calls_resent,
            "tokens_resent": {
                "input": self.usage_resent.input_tokens,
                "output": self.usage_resent.output_tokens,
                "total": self.usage_resent.total_tokens,
            },
            "cost_usd_resent": str(self.cost_usd_resent),
            # every kind, zero included: the same keys as the meter and the fleet_llm_requests metric
            "errors": {str(k): self.errors.get(k, 0) for k in ErrorKind},
            "per_model": self.per_model,
        }


def run_figures(sessions: list[SessionRecord], events: list[Event], run_events: Sequence[Event] = ()) -> RunFigures:
    """Fold the events of a run's agent sessions, and the verifier calls recorded in the run's own
    stream, into its figures."""
    fig = RunFigures()
    for ev in run_events:
        if ev.type == EventType.EMBEDDINGS:
            fig.usage = fig.usage + Usage.from_dict(ev.data.get("usage"))
            fig.cost_usd += Decimal(str(ev.data.get("cost_usd", "0")))
            fig.llm_calls += int(ev.data.get("calls", 0))
        elif ev.type == EventType.VERIFICATION:
            _add_run_calls(fig, ev.data)
        elif ev.type == EventType.PLAN and ev.data.get("planner"):  # the call that planned a goal
            _add_run_calls(fig, ev.data["planner"])
    for rec in sessions:
        fig.sessions[rec.state] += 1
    for ev in events:
        if ev.type in (EventType.MODEL_RESPONSE, EventType.CONTEXT_COMPACTED):  # a summary call is a call
            resp = ChatResponse.from_dict(ev.data["response"])
            fig.usage = fig.usage + resp.usage
            fig.cost_usd += resp.cost_usd
            fig.llm_calls += 1
            m = _model_row(fig, resp.model or "unknown")
            _count_errors(fig, m, resp.retried)
            m["calls"] += 1
            _add_usage(m, resp.usage, resp.cost_usd)
        elif ev.type == EventType.MODEL_RESENT:
            fig.llm_calls_resent += 1
            fig.usage_resent = fig.usage_resent + Usage.from_dict(ev.data.get("usage"))
            fig.cost_usd_resent += Decimal(str(ev.data.get("cost_usd", "0")))
        elif ev.type == EventType.MODEL_ERROR:
            # the attempts retried before the call failed, then the one that ended it
            m = _model_row(fig, str(ev.data.get("model") or "unknown"))
            _count_errors(fig, m, (*ev.data.get("retried", ()), ev.data.get("kind")))
        elif ev.type == EventType.ATTEMPT_FAILED and ev.data.get("kind") == AttemptKind.TIMEOUT:
            fig.errors[ErrorKind.TIMEOUT] += 1
        elif ev.type == EventType.RESULT_ITEM:
            fig.results_raw += 1
    return fig


async def read_run_figures(log: SessionLog, run_id: str) -> dict[str, Any]:
    """A run's figures as ``status RUN`` shows them: the summary's figures, with ``sessions`` counted
    by each state as stored and the number of ``partitions``."""
    sessions = await log.list_sessions(run_id)
    events = await log.events_of_run(run_id, _FIGURE_EVENTS)
    figures = run_figures(sessions, events, await log.get_events(run_id)).to_summary()
    by_state = Counter(str(s.state) for s in sessions)
    return {**figures, "sessions": dict(by_state), "partitions": len(sessions)}


def _add_run_calls(fig: RunFigures, data: Mapping[str, Any]) -> None:
    """Model calls recorded in the run's own stream (verifier, planner): usage, cost, calls, model."""
    usage = Usage.from_dict(data.get("usage"))
    cost = Decimal(str(data.get("cost_usd", "0")))
    calls = int(data.get("calls", 0))
    fig.usage = fig.usage + usage
    fig.cost_usd += cost
    fig.llm_calls += calls
    m = _model_row(fig, str(data.get("model") or "unknown"))
    m["calls"] += calls
    _add_usage(m, usage, cost)


def _model_row(fig: RunFigures, model: str) -> dict[str, Any]:
    row = {"calls": 0, "tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
    return fig.per_model.setdefault(model, {**row, "cost_usd": "0", "errors": {}})


def _count_errors(fig: RunFigures, row: dict[str, Any], kinds: Sequence[object]) -> None:
    for value in kinds:
        kind = recorded_kind(value)
        fig.errors[kind] += 1
        row["errors"][str(kind)] = row["errors"].get(str(kind), 0) + 1


def _add_usage(row: dict[str, Any], usage: Usage, cost: Decimal) -> None:
    row["tokens"] += usage.total_tokens
    row["input_tokens"] += usage.input_tokens
    row["output_tokens"] += usage.output_tokens
    row["cached_input_tokens"] += usage.cached_input_tokens
    row["cost_usd"] = str(Decimal(row["cost_usd"]) + cost)
