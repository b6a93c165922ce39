"""Forecasts for ``estimate`` / ``deploy --dry-run`` and for the run summary, from the plan, the
prices, the limits and the latency this store has observed."""

from __future__ import annotations

import statistics
from decimal import Decimal
from typing import Any

from agent_fleet.config import FleetConfig
from agent_fleet.domain.events import EventType
from agent_fleet.domain.plan import Plan
from agent_fleet.options import RunOptions
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.factory import price_table
from agent_fleet.spend.forecast import forecast

__all__ = ["forecast_for", "observed_latency"]


async def observed_latency(log: SessionLog, *, runs: int = 5) -> float | None:
    """Median seconds per model call in the most recent runs of this store, or None."""
    samples: list[float] = []
    for run in await log.list_runs(limit=runs):
        asked: dict[tuple[str, int], float] = {}
        for ev in await log.events_of_run(run.session_id, [EventType.MODEL_REQUEST, EventType.MODEL_RESPONSE]):
            key = (ev.session_id, int(ev.data.get("turn", 0)))
            if ev.type == EventType.MODEL_REQUEST:
                asked[key] = ev.time
            elif key in asked:
                samples.append(ev.time - asked.pop(key))
        if len(samples) >= 20:
            break
    return statistics.median(samples) if samples else None


def forecast_for(options: RunOptions, plan: Plan, config: FleetConfig, latency: float | None) -> dict[str, Any]:
    """Tokens, list cost and wall time predicted from the plan, as ranges, and the limit that binds."""
    f = forecast(
        plan,
        prices=price_table(config),
        model=options.model,
        concurrency=options.max_concurrency or config.rate_limit.baseline_concurrency,
        latency=latency,
        budget_tokens=options.budget_tokens,
        budget_usd=Decimal(options.budget_usd) if options.budget_usd else None,
        fleet_budget_usd=Decimal(options.fleet_budget_usd) if options.fleet_budget_usd else None,
        admission_slots=None if config.queues is not None else options.agents,
        tokens_per_minute=config.rate_limit.tokens_per_minute,
    )
    return f.to_dict()
