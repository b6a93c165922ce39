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
