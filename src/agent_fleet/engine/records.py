"""What a run records about itself: its sessions (phase 1, each with its routed model), its options
and plan (read back by ``resume``) and its owner."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Collection, Mapping
from typing import Any

from agent_fleet.config import FleetConfig, QualityPolicy
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import EventType
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.payloads import ModelDemoted, Planned, RunCreated
from agent_fleet.domain.plan import Partition, Plan
from agent_fleet.errors import SessionNotFound, UsageError
from agent_fleet.options import DEFAULT_MAX_TOKENS, RunOptions, call_shape
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.router import Router, demotions, estimate_difficulty
from agent_fleet.supervise import recent_model_signals

__all__ = ["create_sessions", "load_run", "load_run_unplanned", "owner"]


async def load_run(log: SessionLog, run_id: str) -> tuple[RunOptions, Plan]:
    """The options and the plan a run recorded."""
    options, plan = await load_run_unplanned(log, run_id)
    if plan is None:
        raise UsageError(f"run {run_id!r} has no recorded plan")
    return options, plan


async def load_run_unplanned(log: SessionLog, run_id: str) -> tuple[RunOptions, Plan | None]:
    """The options and the plan a run recorded; None for the plan of a run recorded before its planner's
    call that has no plan yet (``resume`` plans it)."""
    try:
        state = await log.wake(run_id)
    except SessionNotFound:
        raise SessionNotFound(f"no run {run_id!r} in this store") from None
    if state.session.kind != "run":
        raise UsageError(f"{run_id!r} is an agent session, not a run")
    options: RunOptions | None = None
    plan: Plan | None = None
    planning = False
    for ev in state.events:
        p = decode(ev)
        if isinstance(p, RunCreated):
            options = RunOptions.from_dict(dict(p.options))
            planning = p.planning
        elif isinstance(p, Planned):
            plan = Plan.from_dict(dict(p.plan))
    if options is None or (plan is None and not planning):
        raise UsageError(f"run {run_id!r} has no recorded plan")
    return options, plan


def owner() -> dict[str, Any]:
    """Which process drives a run, so ``status`` can tell a live run from a crashed one."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def owner_alive(owner: Mapping[str, Any], *, not_this_process: bool = False) -> bool:
    """Whether the process an :func:`owner` record names still runs. Another host's counts as alive
    (not ours to judge), as does one we may not signal. ``not_this_process``: a record naming this
    very process is an earlier self (a server restarted with the same pid), so gone."""
    pid, host = owner.get("pid"), owner.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return True
    if not_this_process and pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def create_sessions(
    log: SessionLog,
    router: Router | None,
    run_id: str,
    plan: Plan,
    options: RunOptions,
    config: FleetConfig,
    existing: Collection[str] | None = None,
) -> None:
    """Record the plan's sessions not in ``existing`` (default: the store's), each with the model its
    route picks when fleet.yaml declares tiers (a model fleet.yaml ``supervision.quality`` demotes
    is not picked) and what its calls carry (``call_shape``: the run's flags over the model's entry)."""
    if existing is None:
        existing = {r.session_id for r in await log.list_sessions(run_id)}
    missing = [p for p in plan.partitions if session_id_for(run_id, p.index) not in existing]
    if not missing:
        return

    demoted = await _demoted(log, run_id, config.supervision.quality) if router is not None else {}

    async def create(p: Partition) -> None:
        sid = session_id_for(run_id, p.index)
        model = options.model
        route = None
        if router is not None:  # fleet.yaml tiers: the partition's difficulty picks the model
            route = router.route(estimate_difficulty(p, plan.task), demoted=demoted).to_event()
            model = route["model"]
        info: dict[str, Any] = {
            "run_id": run_id,
            "index": p.index,
            "partition_id": p.id,
            "partition": p.to_dict(),
            "task": plan.task,
            "input_root": plan.input_path,
            "model": model,
        }
        shape = call_shape(options, config, model)
        info["max_tokens"] = shape.max_tokens or DEFAULT_MAX_TOKENS
        info.update((k, v) for k, v in shape.to_dict().items() if k in ("temperature", "seed", "tool_choice"))
        events: list[tuple[str, dict[str, Any]]] = [(EventType.SESSION_CREATED, info)]
        if route is not None:
            events.append((EventType.ROUTE, route))
        await log.emit_events(sid, events)

    async with asyncio.TaskGroup() as tg:
        for p in missing:
            tg.create_task(create(p))


async def _demoted(log: SessionLog, run_id: str, policy: QualityPolicy) -> dict[str, tuple[str, ...]]:
    """Models under fleet.yaml ``supervision.quality`` over the recent runs; each demotion not
    recorded in the run yet becomes a ``model_demoted`` event of its stream."""
    if not policy.enabled:
        return {}
    signals = await recent_model_signals(log, policy, now=time.time())
    found = demotions(signals, policy)
    recorded = {p.model for p in map(decode, await log.get_events(run_id)) if isinstance(p, ModelDemoted)}
    new = [
        (EventType.MODEL_DEMOTED, {"model": m, "reasons": list(why), "signals": signals[m].to_dict()})
        for m, why in found.items()
        if m not in recorded
    ]
    if new:
        await log.emit_events(run_id, new)
    return found
