"""A run's report from plain figures: its status, its summary, its timeline and the ``FleetSnapshot``
behind ``fleet_*`` metrics (live while it runs, final once it is aggregated)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_fleet.aggregate import AggregateStats, band_check, classify_task, dedup_rule
from agent_fleet.dispatch.runner import DispatchStats
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState
from agent_fleet.domain.ledger import RunLedger
from agent_fleet.domain.payloads import Planned, ResultRecorded, RunCreated
from agent_fleet.domain.plan import Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.observe.metrics import CheckFigures, FleetSnapshot, ModelFigures
from agent_fleet.observe.summary import RunFigures
from agent_fleet.options import RunOptions, RunReport
from agent_fleet.spend.forecast import beside_actuals
from agent_fleet.spend.meter import Tally
from agent_fleet.supervise import ReviewItem, queue_counts

__all__ = [
    "CALL_TYPES",
    "ReportReading",
    "SESSION_TYPES",
    "dispatch_sessions",
    "ended_report",
    "fleet_snapshot",
    "metered_models",
    "recorded_models",
    "run_status",
    "run_summary",
    "timeline",
]

# The agent-session events the report reads after the results, one group at a time: the model calls
# and tool calls (figures, model signals), then the sessions' course (review, audit, checks, timeline).
CALL_TYPES = (
    EventType.SESSION_CREATED,
    EventType.ROUTE,
    EventType.SESSION_STARTED,
    EventType.MODEL_RESPONSE,
    EventType.CONTEXT_COMPACTED,
    EventType.MODEL_RESENT,
    EventType.MODEL_ERROR,
    EventType.ATTEMPT_FAILED,
    EventType.TOOL_CALL,
    EventType.TOOL_RESULT,
)
SESSION_TYPES = (
    EventType.SESSION_CREATED,
    EventType.ROUTE,
    EventType.SESSION_STARTED,
    EventType.SESSION_RESUMED,
    EventType.SESSION_PAUSED,
    EventType.SESSION_PREEMPTED,
    EventType.SESSION_COMPLETED,
    EventType.SESSION_FAILED,
    EventType.CHANGE,
    EventType.CHECK,
)


class ReportReading:
    """What the report keeps of a run's recorded results once their events are read: their figures
    folded into the run's ledger, and the events of those under the review's confidence threshold
    (the review queue lists them). The rest of the log is read by groups of types as the report
    needs it, so the run's whole log is never in memory at once."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.ledger = RunLedger()
        self.flagged: list[Event] = []

    def heard_results(self, events: list[Event]) -> None:
        """Fold the run's ``result_item`` events (emptied once read)."""
        for ev in events:
            self.ledger.fold(ev)
            p = decode(ev)
            conf = p.confidence if isinstance(p, ResultRecorded) else None
            if isinstance(conf, int | float) and conf < self.threshold:
                self.flagged.append(ev)
        events.clear()


def fleet_snapshot(
    run_id: str,
    *,
    models: Mapping[str, ModelFigures],
    sessions: Mapping[str, int],
    dedup: AggregateStats | None,
    concurrency_limit: int,
    in_flight: int = 0,
    checks: CheckFigures | None = None,
) -> FleetSnapshot:
    """The figures behind ``fleet_*`` metrics, live or final: the one builder of a run's snapshot."""
    return FleetSnapshot(
        run_id=run_id,
        models=models,
        concurrency_limit=concurrency_limit,
        in_flight=in_flight,
        sessions=sessions,
        dedup_ratio=None if dedup is None else dedup.dedup_rate,
        results_raw=0 if dedup is None else dedup.raw,
        results_unique=0 if dedup is None else dedup.unique,
        checks=checks,
    )


def metered_models(models: Mapping[str, Tally]) -> dict[str, ModelFigures]:
    """Per model, what the gateway's meter counted (a running run's figures)."""
    return {
        name: ModelFigures(
            input_tokens=t.input_tokens,
            output_tokens=t.output_tokens,
            cached_input_tokens=t.cached_input_tokens,
            calls=t.calls,
            cost_usd=float(t.cost_usd),
            errors=dict(t.errors),
        )
        for name, t in models.items()
    }


def recorded_models(figures: RunFigures) -> dict[str, ModelFigures]:
    """Per model, what the run's log holds (an aggregated run's figures)."""
    return {
        m: ModelFigures(
            input_tokens=f["input_tokens"],
            output_tokens=f["output_tokens"],
            cached_input_tokens=f["cached_input_tokens"],
            calls=f["calls"],
            cost_usd=float(f["cost_usd"]),
            errors=f.get("errors", {}),
        )
        for m, f in figures.per_model.items()
    }


def dispatch_sessions(stats: DispatchStats | None) -> dict[str, int]:
    """Sessions by state as a running dispatch counts them (none before it starts)."""
    if stats is None:
        return {}
    return {
        "queued": stats.queued,
        "active": stats.active,
        "completed": stats.completed,
        "failed": stats.failed,
        "paused": stats.paused,
    }


def run_summary(
    *,
    run_id: str,
    status: str,
    options: RunOptions,
    plan: Plan,
    partitions: int,
    figures: RunFigures,
    results_unique: int,
    agg: AggregateStats,
    duration_s: float,
    out_dir: Path,
    verification: Mapping[str, Any] | None,
    review: Sequence[ReviewItem],
    audit: dict[str, Any],
    run_events: Sequence[Event],
) -> dict[str, Any]:
    """``summary.json``: the run's figures, dedup, verification, review queue, decisions and forecast."""
    summary: dict[str, Any] = {
        "run_id": run_id,
        "status": status,
        "task": options.task,
        "input": options.input_path,
        "partitions": partitions,
        **figures.to_summary(),
        "results_unique": results_unique,
        "dedup_rate": round(agg.dedup_rate, 4),
        "dedup": agg.to_dict(),
        "dedup_scope": dedup_rule(agg),
        "dedup_band": band_check(classify_task(options.task, str(plan.kind)), agg).to_dict(),
        "duration_s": duration_s,
        "out_dir": str(out_dir),
    }
    if verification is not None:
        summary["verification"] = verification
        summary["needs_review"] = bool(verification["needs_review"])
    summary["review"] = queue_counts(review)
    summary["decisions"] = audit
    recorded = [decode(ev) for ev in run_events]
    for p in recorded:
        if isinstance(p, Planned) and p.planner_record:
            call = p.planner_record
            summary["planner"] = {k: call.get(k) for k in ("model", "subtasks", "why", "usage", "cost_usd", "calls")}
    for p in recorded:  # a run planned by a model call records its forecast with its plan
        if isinstance(p, RunCreated | Planned) and p.forecast:
            summary["forecast"] = beside_actuals(dict(p.forecast), summary)
            break
    return summary


def run_status(sessions: list[SessionRecord]) -> str:
    states = [s.state for s in sessions]
    if any(st is SessionState.PAUSED for st in states):
        return "paused"
    if not all(st.terminal for st in states):
        return "interrupted"
    if any(st is SessionState.FAILED for st in states):
        return "partial" if any(st is SessionState.COMPLETED for st in states) else "failed"
    return "completed"


def timeline(events: list[Event], origin: float) -> list[dict[str, Any]]:
    """Per session: first start and last end, in seconds since the run was created."""
    spans: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.type == EventType.SESSION_STARTED:
            spans.setdefault(ev.session_id, {"session_id": ev.session_id, "start": ev.time - origin})
        elif ev.type in (EventType.SESSION_COMPLETED, EventType.SESSION_FAILED, EventType.SESSION_PAUSED):
            span = spans.setdefault(ev.session_id, {"session_id": ev.session_id, "start": ev.time - origin})
            span["end"] = ev.time - origin
            span["state"] = ev.type.removeprefix("session_")
    return [s for s in spans.values() if "end" in s]


def ended_report(run_id: str, options: RunOptions) -> RunReport | None:
    """The report an ended run wrote (its summary.json and results.jsonl); None when they are gone."""
    out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or summary.get("run_id") != run_id or "status" not in summary:
        return None
    results: tuple[ResultItem, ...] = ()
    try:
        with open(out_dir / "results.jsonl", encoding="utf-8") as f:
            results = tuple(ResultItem.from_dict(json.loads(line)) for line in f if line.strip())
    except (OSError, ValueError, KeyError, TypeError):
        results = ()
    return RunReport(run_id, summary, results, out_dir)
