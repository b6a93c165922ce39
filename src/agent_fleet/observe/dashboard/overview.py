"""The JSON documents the dashboard page draws: the fleet overview, a run's row and its sessions."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agent_fleet.domain.events import SessionState
from agent_fleet.observe.dashboard.merge import histogram_quantile
from agent_fleet.observe.dashboard.reader import FleetReader, RunView
from agent_fleet.observe.metrics import CHECK_WAIT_BUCKETS, CheckFigures, check_figures

__all__ = ["overview", "queue_rows", "run_detail", "run_row"]

_SHOWN_OPTIONS = ("agents", "model", "queue", "priority", "team", "budget_tokens", "budget_usd", "fleet_budget_usd")


def _forecast_cost(run: RunView) -> dict[str, float] | None:
    cost = (run.forecast or {}).get("cost_usd")
    if not isinstance(cost, dict):
        return None
    return {"low": float(cost.get("low", 0)), "high": float(cost.get("high", 0))}


def _checks(figures: CheckFigures) -> dict[str, Any] | None:
    """The checks panel: counts by outcome and the admission wait's p95 (None: no check recorded)."""
    if not sum(figures.outcomes.values()):
        return None
    p95 = histogram_quantile(
        0.95, {**dict(zip(CHECK_WAIT_BUCKETS, figures.wait_buckets, strict=False)), float("inf"): figures.wait_count}
    )
    return {"outcomes": dict(figures.outcomes), "wait_p95_s": None if p95 is None else round(p95, 4)}


def _recorded_checks(run: RunView) -> list[dict[str, Any]]:
    return [s.check for s in run.sessions.values() if s.check is not None]


def run_row(reader: FleetReader, run: RunView) -> dict[str, Any]:
    states: dict[str, int] = defaultdict(int)
    for s in run.sessions.values():
        states[s.state] += 1
    raw = unique = 0.0
    for labels, v in reader.merged.values("fleet_results_total").items():
        d = dict(labels)
        if d.get("run") == run.run_id:
            raw += v if d.get("kind") == "raw" else 0
            unique += v if d.get("kind") == "unique" else 0
    dedup = 1 - unique / raw if raw else None
    return {
        "run_id": run.run_id,
        "state": run.record.state.value,
        "team": run.team,
        "queue": run.options.get("queue") or "default",
        "task": run.task,
        "created_at": run.record.created_at,
        "sessions": dict(states),
        "active": states.get(SessionState.RUNNING.value, 0),
        "tokens": run.tokens(),
        "calls": run.calls(),
        "errors": sum(s.errors for s in run.sessions.values()),
        "preemptions": sum(s.preemptions for s in run.sessions.values()),
        "cost_usd": float(run.cost()),
        "forecast_usd": _forecast_cost(run),
        "results_raw": int(raw),
        "dedup_rate": None if dedup is None else round(dedup, 4),
        "checks": _checks(check_figures(_recorded_checks(run))),
        "changes": {
            "sessions": sum(1 for s in run.sessions.values() if s.changed_files is not None),
            "files": sum(s.changed_files or 0 for s in run.sessions.values()),
            "merged": run.merged,
        },
    }


def run_detail(reader: FleetReader, run_id: str) -> dict[str, Any] | None:
    run = reader.runs.get(run_id)
    if run is None:
        return None
    return {
        **run_row(reader, run),
        "options": {k: v for k, v in run.options.items() if k in _SHOWN_OPTIONS},
        "session_rows": [s.to_row(run.budget) for _, s in sorted(run.sessions.items())],
    }


def queue_rows(reader: FleetReader) -> list[dict[str, Any]]:
    """Per ClusterQueue, from Kueue's metrics the runs store: admitted, pending, wait p95, preemptions."""
    m = reader.merged
    rows: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        return rows.setdefault(
            name,
            {
                "name": name,
                "admitted": 0,
                "pending_active": 0,
                "pending_inadmissible": 0,
                "admitted_total": 0,
                "preempted_total": 0,
                "wait_p95_s": None,
            },
        )

    for labels, v in m.values("kueue_admitted_active_workloads").items():
        row(dict(labels)["cluster_queue"])["admitted"] += int(v)
    for labels, v in m.values("kueue_pending_workloads").items():
        d = dict(labels)
        row(d["cluster_queue"])[f"pending_{d.get('status', 'active')}"] += int(v)
    for labels, v in m.values("kueue_admitted_workloads_total").items():
        row(dict(labels)["cluster_queue"])["admitted_total"] += int(v)
    for labels, v in m.values("kueue_preempted_workloads_total").items():
        row(dict(labels)["preempting_cluster_queue"])["preempted_total"] += int(v)
    buckets: dict[str, dict[float, float]] = defaultdict(dict)
    for labels, v in m.values("kueue_admission_wait_time_seconds_bucket").items():
        d = dict(labels)
        buckets[d["cluster_queue"]][float(d["le"])] = v
    for name, b in buckets.items():
        p95 = histogram_quantile(0.95, b)
        row(name)["wait_p95_s"] = None if p95 is None else round(p95, 4)
    return [rows[k] for k in sorted(rows)]


def overview(reader: FleetReader, *, series: bool = True) -> dict[str, Any]:
    """Everything the dashboard's first screen shows, for the runs the reader follows; ``series=False``
    sends the time series' last point only (a live update)."""
    tokens_per_s, error_rate = reader.rate()
    runs = [run_row(reader, r) for r in sorted(reader.runs.values(), key=lambda r: -r.record.created_at)]
    live = [r for r in runs if r["state"] == SessionState.RUNNING.value]
    raw = sum(r["results_raw"] for r in runs)
    unique_share = [r["dedup_rate"] * r["results_raw"] for r in runs if r["dedup_rate"] is not None]
    forecast_low = sum(r["forecast_usd"]["low"] for r in live if r["forecast_usd"])
    forecast_high = sum(r["forecast_usd"]["high"] for r in live if r["forecast_usd"])
    near: list[dict[str, Any]] = [
        {"session_id": s.session_id, "run_id": run.run_id, "team": run.team, "ratio": round(ratio, 4)}
        for run in reader.runs.values()
        for ratio, s in run.ratios()
        if ratio >= reader.options.near_budget
    ]
    near.sort(key=lambda r: (-r["ratio"], r["session_id"]))
    last = reader.history[-1] if reader.history else None
    return {
        "time": last.at if last else None,
        "active_agents": sum(r["active"] for r in runs),
        "live_runs": len(live),
        "tokens_total": sum(r["tokens"] for r in runs),
        "tokens_per_s": round(tokens_per_s, 2),
        "calls": sum(r["calls"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "error_rate": round(error_rate, 4),
        "dedup_rate": round(sum(unique_share) / raw, 4) if raw else None,
        "cost_usd": sum(r["cost_usd"] for r in live),
        "forecast_usd": {"low": forecast_low, "high": forecast_high} if forecast_high else None,
        "concurrency_limit": last.concurrency_limit if last else 0,
        "in_flight": last.in_flight if last else 0,
        "preemptions": sum(r["preemptions"] for r in runs),
        "checks": _checks(check_figures([c for r in reader.runs.values() for c in _recorded_checks(r)])),
        "queues": queue_rows(reader),
        "near_budget": {"threshold": reader.options.near_budget, "sessions": near[: reader.options.top_k]},
        "runs": runs,
        "series": [
            {"t": p.at, "tokens": p.tokens, "active": p.active, "limit": p.concurrency_limit, "in_flight": p.in_flight}
            for p in (reader.history if series else list(reader.history)[-1:])
        ],
    }
