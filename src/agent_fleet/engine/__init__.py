"""The composition root: builds the planes and runs decompose → dispatch → aggregate.

Only this package and ``cli/`` wire implementations together. :class:`Engine` (``core``) owns the
store, the gateway and the workforce of one process and drives each run through one
:class:`~agent_fleet.engine.run.RunCoordinator` (``run``: the run's TaskGroup, its ticker, live
dedup and verification; shutdown notify → drain → grace → cancel, safe to call twice). ``compose``
builds an engine from one ``FleetConfig`` (``open_engine``), ``phases`` holds the phase API
(``plan_run``, ``estimate``, ``deploy``, ``resume``), ``report`` builds a run's summary and its
``FleetSnapshot`` from plain figures, ``preflight`` checks a run's options before it is recorded.

A run's own stream holds ``run_created`` and ``plan`` (written in one atomic append), so a run
can always be resumed from the store alone: ``resume`` reads the options and the plan back,
finishes every session that did not end, and aggregates again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports
from agent_fleet.engine.compose import open_engine
from agent_fleet.engine.core import Engine
from agent_fleet.engine.phases import deploy, estimate, plan_run, resume
from agent_fleet.engine.preflight import admission_objects as admission_objects
from agent_fleet.engine.preflight import check_run_options as check_run_options
from agent_fleet.engine.probe import check_provider
from agent_fleet.engine.records import load_run
from agent_fleet.options import RunOptions, RunReport, exit_code_for
from agent_fleet.options import with_config as with_config

__all__ = [
    "Engine",
    "RunOptions",
    "RunReport",
    "check_provider",
    "deploy",
    "estimate",
    "exit_code_for",
    "load_run",
    "open_engine",
    "plan_run",
    "resume",
]

# What the engine's hosts wire (control/: `agent-fleet serve`; cluster/executor: the Ray executor),
# outside __all__: they import the engine and the planes through this package only. Loaded on first use.
if TYPE_CHECKING:
    from agent_fleet.admission import AdmissionController as AdmissionController
    from agent_fleet.admission import KueueObjects as KueueObjects
    from agent_fleet.admission.workload_slots import AdmissionSlots as AdmissionSlots
    from agent_fleet.aggregate.live import snapshot_key as snapshot_key
    from agent_fleet.decompose.subtasks import needs_planner as needs_planner
    from agent_fleet.dispatch.health import HealthConfig as HealthConfig
    from agent_fleet.dispatch.pool import WorkerSpec as WorkerSpec
    from agent_fleet.engine.changes import check_base as check_base
    from agent_fleet.engine.changes import run_changes_view as run_changes_view
    from agent_fleet.engine.compose import assemble as assemble
    from agent_fleet.engine.forecasting import forecast_for as forecast_for
    from agent_fleet.engine.forecasting import learned_prior as learned_prior
    from agent_fleet.engine.forecasting import observed_latency as observed_latency
    from agent_fleet.engine.planning import plan_goal as plan_goal
    from agent_fleet.engine.preflight import check_changes as check_changes
    from agent_fleet.engine.preflight import check_queue_budgets as check_queue_budgets
    from agent_fleet.engine.preflight import configured_queues as configured_queues
    from agent_fleet.engine.preflight import default_queue_objects as default_queue_objects
    from agent_fleet.engine.preflight import queues_source as queues_source
    from agent_fleet.engine.preflight import session_slots as session_slots
    from agent_fleet.engine.records import owner as owner
    from agent_fleet.engine.records import owner_alive as owner_alive
    from agent_fleet.engine.run import DEFAULT_GRACE_S as DEFAULT_GRACE_S
    from agent_fleet.engine.tallies import GroupOf as GroupOf
    from agent_fleet.engine.tallies import Spend as Spend
    from agent_fleet.engine.tallies import seed_tallies as seed_tallies
    from agent_fleet.observe.dashboard.reader import TeamTally as TeamTally
    from agent_fleet.observe.summary import read_run_figures as read_run_figures
    from agent_fleet.session.lease import DEFAULT_TTL_S as DEFAULT_TTL_S
    from agent_fleet.session.lease import LeaseKeeper as LeaseKeeper
    from agent_fleet.session.lease import LeaseStore as LeaseStore
    from agent_fleet.session.lease import bump_attempt_fence as bump_attempt_fence
    from agent_fleet.session.lease import this_process as this_process
    from agent_fleet.session.store import resolve_store_url as resolve_store_url
    from agent_fleet.session.store import store_file as store_file
    from agent_fleet.spend.factory import build_gateway as build_gateway
    from agent_fleet.spend.gateway import Gateway as Gateway
    from agent_fleet.spend.service import GatewayService as GatewayService

__getattr__ = lazy_exports(
    __name__,
    {
        "HealthConfig": "agent_fleet.dispatch.health",
        "WorkerSpec": "agent_fleet.dispatch.pool",
        "bump_attempt_fence": "agent_fleet.session.lease",
        "this_process": "agent_fleet.session.lease",
        "Gateway": "agent_fleet.spend.gateway",
        "GatewayService": "agent_fleet.spend.service",
        "AdmissionController": "agent_fleet.admission",
        "KueueObjects": "agent_fleet.admission",
        "AdmissionSlots": "agent_fleet.admission.workload_slots",
        "snapshot_key": "agent_fleet.aggregate.live",
        "needs_planner": "agent_fleet.decompose.subtasks",
        "check_base": "agent_fleet.engine.changes",
        "run_changes_view": "agent_fleet.engine.changes",
        "assemble": "agent_fleet.engine.compose",
        "forecast_for": "agent_fleet.engine.forecasting",
        "learned_prior": "agent_fleet.engine.forecasting",
        "observed_latency": "agent_fleet.engine.forecasting",
        "plan_goal": "agent_fleet.engine.planning",
        "check_changes": "agent_fleet.engine.preflight",
        "check_queue_budgets": "agent_fleet.engine.preflight",
        "configured_queues": "agent_fleet.engine.preflight",
        "default_queue_objects": "agent_fleet.engine.preflight",
        "queues_source": "agent_fleet.engine.preflight",
        "session_slots": "agent_fleet.engine.preflight",
        "owner": "agent_fleet.engine.records",
        "owner_alive": "agent_fleet.engine.records",
        "DEFAULT_GRACE_S": "agent_fleet.engine.run",
        "GroupOf": "agent_fleet.engine.tallies",
        "Spend": "agent_fleet.engine.tallies",
        "seed_tallies": "agent_fleet.engine.tallies",
        "TeamTally": "agent_fleet.observe.dashboard.reader",
        "read_run_figures": "agent_fleet.observe.summary",
        "DEFAULT_TTL_S": "agent_fleet.session.lease",
        "LeaseKeeper": "agent_fleet.session.lease",
        "LeaseStore": "agent_fleet.session.lease",
        "resolve_store_url": "agent_fleet.session.store",
        "store_file": "agent_fleet.session.store",
        "build_gateway": "agent_fleet.spend.factory",
    },
)
