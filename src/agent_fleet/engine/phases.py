"""The phase API: ``plan_run`` (phase 1), ``estimate``, and ``deploy`` / ``resume``, which open an
engine and take a recorded run through dispatch (phase 2) and aggregation (phase 3) with one
:class:`~agent_fleet.engine.run.RunCoordinator` (``Engine.run``).

A thin façade: fleet.yaml is read once per call, off the event loop, and that one ``FleetConfig``
goes to the checks, the forecast and the engine."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_fleet.config import FleetConfig, load_config
from agent_fleet.decompose import decompose
from agent_fleet.decompose.subtasks import needs_planner
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.domain.ids import new_run_id
from agent_fleet.domain.plan import InputKind, Plan
from agent_fleet.engine.changes import check_base
from agent_fleet.engine.compose import open_engine, probed, run_gateway
from agent_fleet.engine.core import Engine
from agent_fleet.engine.forecasting import forecast_for, learned_prior, observed_latency
from agent_fleet.engine.planning import plan_goal, plan_recorded
from agent_fleet.engine.preflight import (
    check_changes,
    check_embedder,
    check_push,
    check_run_options,
    claim_out_dir,
)
from agent_fleet.engine.push import push_after_run
from agent_fleet.engine.records import load_run_unplanned, owner
from agent_fleet.engine.remotes import clone_input, parse_remote_input
from agent_fleet.engine.report import ended_report
from agent_fleet.errors import FleetError
from agent_fleet.hands.shell import RUN
from agent_fleet.hands.workspace import git_location
from agent_fleet.hands.workspace_files import EDIT_TOOL_SPECS
from agent_fleet.options import RunOptions, RunReport, call_shape, session_tokens, with_config
from agent_fleet.session.store import open_store, resolve_store_url

__all__ = ["deploy", "estimate", "plan_run", "resume"]


def plan_run(options: RunOptions) -> Plan:
    """Phase 1: decompose the task and input into a checked plan. Where the run keeps changes (a
    directory input inside a git repository: its base is recorded with the plan), its directory
    partitions' toolsets include the edits."""
    plan = decompose(options.task, options.input_path, agents=options.agents, budget_tokens=session_tokens(options))
    path = Path(options.input_path) if options.input_path else None
    if path is None or not path.is_dir() or git_location(path) is None:
        return plan
    edits = (*(s.name for s in EDIT_TOOL_SPECS), RUN.name)
    parts = tuple(
        replace(p, tools=tuple(dict.fromkeys([*p.tools, *edits]))) if p.kind is InputKind.DIRECTORY else p
        for p in plan.partitions
    )
    return replace(plan, partitions=parts)


async def estimate(options: RunOptions, *, store_url: str | None = None) -> dict[str, Any]:
    """``deploy --dry-run`` / ``agent-fleet estimate``: decompose and forecast; nothing is run or recorded."""
    options, config = await _resolved(options)
    plan = await asyncio.to_thread(plan_run, options)
    if needs_planner(options.task, options.input_path, options.agents):
        plan = await _planned_for_estimate(options, config, plan)
    latency = prior = None
    url = resolve_store_url(store_url)
    if not url.startswith("sqlite:///") or await asyncio.to_thread(os.path.exists, url.removeprefix("sqlite:///")):
        async with open_store(url) as log:
            latency = await observed_latency(log)
            prior = await learned_prior(log, options, plan)
    return {
        "task": options.task,
        "input": options.input_path,
        "plan": {
            "partitions": len(plan.partitions),
            "scopes": [{"id": p.id, "items": list(p.items)} for p in plan.partitions],
            "items": plan.total_items,
            "depth": plan.root.depth(),
            "largest_partition_tokens": max((p.est_tokens for p in plan.partitions), default=0),
            "notes": list(plan.notes),
        },
        "forecast": forecast_for(options, plan, config, latency, prior),
    }


async def _planned_for_estimate(options: RunOptions, config: FleetConfig, fallback: Plan) -> Plan:
    """A goal's plan for ``estimate``: the planner's call is made (and metered) but nothing is recorded;
    a deploy plans again. Without a reachable provider, the one-session plan and a note saying so."""
    async with AsyncExitStack() as stack:
        try:
            built = run_gateway(options, config, run_id="estimate", api_key=None, env=None)
            gateway = await stack.enter_async_context(probed(built))
        except FleetError as exc:
            note = f"the task is a goal: deploy plans it with one model call; the planner was not asked here ({exc})"
            return replace(fallback, notes=(*fallback.notes, note))
        plan, record = await plan_goal(gateway, "estimate", options, call_shape(options, config, options.model))
    note = f"planned by one model call ({record['usage'].get('input_tokens', 0)} + "
    note += f"{record['usage'].get('output_tokens', 0)} tokens); deploy plans again and records its plan"
    return replace(plan, notes=(*plan.notes, note))


async def _resolved(options: RunOptions) -> tuple[RunOptions, FleetConfig]:
    """A git remote input cloned (its clone is the run's input; the URL is kept beside it), absolute
    paths (a run may be resumed from elsewhere), fleet.yaml read (once) and its defaults filled in."""
    remote = parse_remote_input(options.input_path)
    if remote is not None:
        clone = await asyncio.to_thread(clone_input, remote)
        options = replace(options, input_path=str(clone), input_url=str(remote))
    if options.input_path is not None:
        options = replace(options, input_path=await asyncio.to_thread(os.path.abspath, options.input_path))
    if options.config_path is not None:
        options = replace(options, config_path=await asyncio.to_thread(os.path.abspath, options.config_path))
    config = await asyncio.to_thread(load_config, options.config_path)
    return with_config(options, config), config


async def deploy(
    options: RunOptions,
    *,
    store_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[str, Engine], None] | None = None,
    slots: SessionSlots | None = None,
    run_id: str | None = None,
) -> RunReport:
    """Decompose → dispatch → aggregate, end to end. ``on_start(run_id, engine)`` is called once the
    run is recorded (progress displays use ``engine.stats()``). ``run_id`` names the new run (a
    caller that must record the id before the run starts, e.g. a workflow's checkpoint)."""
    options, config = await _resolved(options)
    if slots is None:  # the caller's own slots admit by their own rules
        await asyncio.to_thread(check_run_options, options, config)
    else:
        check_embedder(options)
        await asyncio.to_thread(check_changes, options)
    planned = needs_planner(options.task, options.input_path, options.agents)
    plan = None if planned else await asyncio.to_thread(plan_run, options)
    run_id = run_id or new_run_id()
    out_dir = options.out_dir or str(Path.cwd() / ".fleet" / "runs" / run_id)
    options = replace(options, out_dir=out_dir)
    await asyncio.to_thread(claim_out_dir, out_dir, run_id)  # before anything is recorded
    async with open_engine(
        options, run_id=run_id, store_url=store_url, api_key=api_key, env=env, slots=slots, config=config
    ) as engine:
        engine.assign(run_id, options)  # the planner's call is the run's queue's (and team's) too
        if plan is None:  # a goal: one orchestrator call of a recorded run plans it (never repeated)
            await engine.record_run(options, run_id=run_id)
            plan = await _plan_recorded(engine, run_id, options, config)
        else:
            await _create(engine, run_id, plan, options, config, None)
        return await _run_to_the_end(engine, run_id, plan, options, on_start)


async def _plan_recorded(engine: Engine, run_id: str, options: RunOptions, config: FleetConfig) -> Plan:
    """Plan a recorded run's goal with one model call and record the plan (see ``engine.planning``)."""
    shape = call_shape(options, config, options.model)
    plan, planner = await plan_recorded(engine.gateway, engine.log, run_id, options, shape)
    await _create(engine, run_id, plan, options, config, planner)
    return plan


async def _create(
    engine: Engine, run_id: str, plan: Plan, options: RunOptions, config: FleetConfig, planner: dict[str, Any] | None
) -> None:
    prior = await learned_prior(engine.log, options, plan)
    predicted = forecast_for(options, plan, config, await observed_latency(engine.log), prior)
    await engine.create_run(plan, options, run_id=run_id, forecast=predicted, planner=planner)


async def resume(
    run_id: str,
    *,
    store_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[str, Engine], None] | None = None,
    slots: SessionSlots | None = None,
    wait: bool = False,
    retry_failed: bool = False,
    push: str | None = None,
) -> RunReport:
    """Continue an interrupted, crashed or budget-paused run from its log. Raises RunOwned while
    another live engine owns the run, unless ``wait`` (then it waits for the lease).

    A run that has ended is left as it is and its recorded summary returned (``on_start`` is not
    called), unless ``retry_failed`` and some session failed for good: those run again, from their
    logs, and the run is aggregated anew."""
    log = open_store(resolve_store_url(store_url))
    async with log:
        options, planned = await load_run_unplanned(log, run_id)
        record = await log.get_session(run_id)
        failed = [s for s in await log.list_sessions(run_id) if s.state is SessionState.FAILED] if retry_failed else []
    if push is not None:
        options = replace(options, push=push)
        await asyncio.to_thread(check_push, options)
    if record is not None and record.state.terminal and not failed:
        ended = await asyncio.to_thread(ended_report, run_id, options)
        if ended is not None:
            return await push_after_run(ended, options, planned.input_path if planned is not None else None)
    async with open_store(resolve_store_url(store_url)) as log:
        await check_base(log, run_id)  # its base commit gone: exit 2 before anything runs
    config = await asyncio.to_thread(load_config, options.config_path)
    if slots is None:
        await asyncio.to_thread(check_run_options, options, config)
    async with open_engine(
        options, run_id=run_id, store_url=store_url, api_key=api_key, env=env, slots=slots, wait=wait, config=config
    ) as engine:
        await engine.log.emit_event(run_id, EventType.RUN_RESUMED, {"owner": owner(), "retry_failed": retry_failed})
        # a run whose planner's call failed is planned now (the call recorded like the first one)
        plan = planned if planned is not None else await _plan_recorded(engine, run_id, options, config)
        if retry_failed:  # read again under the lease: what failed for good runs again
            for rec in await engine.log.list_sessions(run_id):
                if rec.state is SessionState.FAILED:
                    await engine.log.emit_event(rec.session_id, EventType.SESSION_RESUMED, {"reason": "retry_failed"})
        return await _run_to_the_end(engine, run_id, plan, options, on_start)


async def _run_to_the_end(
    engine: Engine, run_id: str, plan: Plan, options: RunOptions, on_start: Callable[[str, Engine], None] | None
) -> RunReport:
    """Phases 2 and 3 of a recorded run: dispatch what has not ended and aggregate, overlapped."""
    if on_start is not None:
        on_start(run_id, engine)
    report = await engine.run(run_id, plan, options)
    return await push_after_run(report, options, plan.input_path)
