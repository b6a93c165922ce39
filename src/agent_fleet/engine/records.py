"""What a run records about itself: its sessions (phase 1, each with its routed model), its options
and plan (read back by ``resume``) and its owner."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Collection, Mapping
from typing import Any

from agent_fleet.config import QualityPolicy
from agent_fleet.domain.events import EventType
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.plan import Partition, Plan
from agent_fleet.errors import SessionNotFound, UsageError
from agent_fleet.options import RunOptions
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.router import Router, demotions, estimate_difficulty
from agent_fleet.supervise import recent_model_signals

__all__ = ["create_sessions", "load_run", "owner"]


async def load_run(log: SessionLog, run_id: str) -> tuple[RunOptions, Plan]:
    """The options and the plan a run recorded."""
    try:
        state = await log.wake(run_id)
    except SessionNotFound:
        raise SessionNotFound(f"no run {run_id!r} in this store") from None
    if state.session.kind != "run":
        raise UsageError(f"{run_id!r} is an agent session, not a run")
    options: RunOptions | None = None
    plan: Plan | None = None
    for ev in state.events:
        if ev.type == EventType.RUN_CREATED:
            options = RunOptions.from_dict(ev.data["options"])
        elif ev.type == EventType.PLAN:
            plan = Plan.from_dict(ev.data["plan"])
    if options is None or plan is None:
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
    quality: QualityPolicy,
    existing: Collection[str] | None = None,
) -> None:
    """Record the plan's sessions not in ``existing`` (default: the store's), each with the model its
    route picks when fleet.yaml declares tiers (a model fleet.yaml ``supervision.quality`` demotes
    is not picked)."""
    if existing is None:
        existing = {r.session_id for r in await log.list_sessions(run_id)}
    missing = [p for p in plan.partitions if session_id_for(run_id, p.index) not in existing]
    if not missing:
        return

    demoted = await _demoted(log, run_id, quality) if router is not None else {}

    async def create(p: Partition) -> None:
        sid = session_id_for(run_id, p.index)
        model = options.model
        route = None
        if router is not None:  # fleet.yaml tiers: the partition's difficulty picks the model
            route = router.route(estimate_difficulty(p, plan.task), demoted=demoted).to_event()
            model = route["model"]
        info = {
            "run_id": run_id,
            "index": p.index,
            "partition_id": p.id,
            "partition": p.to_dict(),
            "task": plan.task,
            "input_root": plan.input_path,
            "model": model,
            "max_tokens": options.max_tokens,
        }
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
    recorded = {e.data.get("model") for e in await log.get_events(run_id) if e.type == EventType.MODEL_DEMOTED}
    new = [
        (EventType.MODEL_DEMOTED, {"model": m, "reasons": list(why), "signals": signals[m].to_dict()})
        for m, why in found.items()
        if m not in recorded
    ]
    if new:
        await log.emit_events(run_id, new)
    return found
