"""Forecasts for ``estimate`` / ``deploy --dry-run`` and for the run summary, from the plan, the
prices, the limits, the latency this store has observed, and — once the store holds finished runs of
the same task type and model — the calls and tokens their sessions took (a learned prior)."""

from __future__ import annotations

import statistics
from decimal import Decimal
from typing import Any

from agent_fleet.aggregate.bands import classify_task
from agent_fleet.config import FleetConfig
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.ledger import SessionLedger, Tally
from agent_fleet.domain.payloads import Embeddings, ModelRequest, ModelResponse, Planned, RunCreated, Verification
from agent_fleet.domain.plan import Plan
from agent_fleet.options import RunOptions
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.factory import price_table
from agent_fleet.spend.forecast import Prior, SessionSample, fit_prior, forecast

__all__ = ["forecast_for", "learned_prior", "observed_latency"]


async def observed_latency(log: SessionLog, *, runs: int = 5) -> float | None:
    """Median seconds per model call in the most recent runs of this store, or None."""
    samples: list[float] = []
    for run in await log.list_runs(limit=runs):
        asked: dict[tuple[str, int], float] = {}
        for ev in await log.events_of_run(run.session_id, [EventType.MODEL_REQUEST, EventType.MODEL_RESPONSE]):
            p = decode(ev)
            key = (ev.session_id, p.turn if isinstance(p, ModelRequest | ModelResponse) else 0)
            if ev.type == EventType.MODEL_REQUEST:
                asked[key] = ev.time
            elif key in asked:
                samples.append(ev.time - asked.pop(key))
        if len(samples) >= 20:
            break
    return statistics.median(samples) if samples else None


async def learned_prior(
    log: SessionLog, options: RunOptions, plan: Plan, *, runs: int = 5, scan: int = 50
) -> Prior | None:
    """Fit a prior on the completed sessions of the most recent ``runs`` completed runs of this task
    type and model (among the last ``scan`` runs of the store), or None when there are none."""
    task_type = str(classify_task(options.task, str(plan.kind)))
    samples: list[SessionSample] = []
    used: list[str] = []
    overhead: list[tuple[int, int, int]] = []
    for run in await log.list_runs(limit=scan):
        if len(used) >= runs:
            break
        if run.state != SessionState.COMPLETED:
            continue
        stream = await log.get_events(run.session_id)
        recorded = _recorded(stream)
        if recorded is None:
            continue
        past_options, past_plan = recorded
        same_type = str(classify_task(past_options.task, str(past_plan.kind))) == task_type
        if past_options.model != options.model or not same_type:
            continue
        found = await _session_samples(log, run.session_id, past_plan)
        if found:
            samples += found
            used.append(run.session_id)
            overhead.append(_run_overhead(stream))
    return fit_prior(samples, task_type=task_type, model=options.model, runs=used, overhead=overhead)


def _run_overhead(stream: list[Event]) -> tuple[int, int, int]:
    """Calls and tokens a run spent outside its sessions: verification and provider embeddings."""
    spent = Tally()
    for ev in stream:
        p = decode(ev)
        if isinstance(p, Verification | Embeddings):
            spent.add(p.spent.usage, p.spent.cost_usd, p.spent.calls)
    return spent.calls, spent.usage.input_tokens, spent.usage.output_tokens


def _recorded(events: list[Event]) -> tuple[RunOptions, Plan] | None:
    options = plan = None
    for ev in events:
        p = decode(ev)
        if isinstance(p, RunCreated):
            options = RunOptions.from_dict(dict(p.options))
        elif isinstance(p, Planned):
            plan = Plan.from_dict(dict(p.plan))
    return None if options is None or plan is None else (options, plan)


async def _session_samples(log: SessionLog, run_id: str, plan: Plan) -> list[SessionSample]:
    done = {r.session_id for r in await log.list_sessions(run_id) if r.state == SessionState.COMPLETED}
    size = {session_id_for(run_id, p.index): p.est_tokens for p in plan.partitions}
    ledgers = {sid: SessionLedger() for sid in done if sid in size}
    for ev in await log.events_of_run(run_id, [EventType.MODEL_RESPONSE]):
        ledger = ledgers.get(ev.session_id)
        if ledger is not None:
            ledger.fold(ev)
    return [
        SessionSample(size[sid], led.calls, led.usage.input_tokens, led.usage.output_tokens)
        for sid, led in ledgers.items()
        if led.calls > 0
    ]


def forecast_for(
    options: RunOptions, plan: Plan, config: FleetConfig, latency: float | None, prior: Prior | None = None
) -> dict[str, Any]:
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
        prior=prior,
    )
    return f.to_dict()
