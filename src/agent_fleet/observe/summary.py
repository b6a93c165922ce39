"""Run figures computed from the session log alone, so the summary always equals what the log holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.attempts import AttemptKind
from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage

__all__ = ["RunFigures", "run_figures"]

# How the gateway names retried errors, and how a failed call's error class maps onto them.
_ERROR_KINDS = {"rate_limited": "rate_limited", "server": "server", "timeout": "timeout"}
_FAILED_CALL_KIND = {
    "RateLimited": "rate_limited",
    "Overloaded": "server",
    "ProviderUnreachable": "timeout",
}


@dataclass(slots=True)
class RunFigures:
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    llm_calls: int = 0
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
            "errors": {k: self.errors.get(k, 0) for k in ("rate_limited", "server", "timeout")},
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
            fig.usage = fig.usage + Usage.from_dict(ev.data.get("usage"))
            fig.cost_usd += Decimal(str(ev.data.get("cost_usd", "0")))
            fig.llm_calls += int(ev.data.get("calls", 0))
            usage = Usage.from_dict(ev.data.get("usage"))
            m = _model_row(fig, str(ev.data.get("model") or "unknown"))
            m["calls"] += int(ev.data.get("calls", 0))
            _add_usage(m, usage, Decimal(str(ev.data.get("cost_usd", "0"))))
    for rec in sessions:
        fig.sessions[rec.state] += 1
    for ev in events:
        if ev.type == EventType.MODEL_RESPONSE:
            resp = ChatResponse.from_dict(ev.data["response"])
            fig.usage = fig.usage + resp.usage
            fig.cost_usd += resp.cost_usd
            fig.llm_calls += 1
            for kind in resp.retried:
                fig.errors[_ERROR_KINDS.get(kind, "server")] += 1
            m = _model_row(fig, resp.model or "unknown")
            m["calls"] += 1
            _add_usage(m, resp.usage, resp.cost_usd)
        elif ev.type == EventType.MODEL_ERROR:
            fig.errors[_FAILED_CALL_KIND.get(str(ev.data.get("kind", "")), "server")] += 1
        elif ev.type == EventType.ATTEMPT_FAILED and ev.data.get("kind") == AttemptKind.TIMEOUT:
            fig.errors["timeout"] += 1
        elif ev.type == EventType.RESULT_ITEM:
            fig.results_raw += 1
    return fig


def _model_row(fig: RunFigures, model: str) -> dict[str, Any]:
    row = {"calls": 0, "tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
    return fig.per_model.setdefault(model, {**row, "cost_usd": "0"})


def _add_usage(row: dict[str, Any], usage: Usage, cost: Decimal) -> None:
    row["tokens"] += usage.total_tokens
    row["input_tokens"] += usage.input_tokens
    row["output_tokens"] += usage.output_tokens
    row["cached_input_tokens"] += usage.cached_input_tokens
    row["cost_usd"] = str(Decimal(row["cost_usd"]) + cost)
