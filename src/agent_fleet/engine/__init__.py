"""The composition root: builds the planes and runs decompose → dispatch → aggregate (see ``core``)."""

from __future__ import annotations

from agent_fleet.engine.core import (
    Engine,
    RunOptions,
    RunReport,
    check_provider,
    deploy,
    estimate,
    exit_code_for,
    load_run,
    open_engine,
    plan_run,
    resume,
)
from agent_fleet.engine.core import admission_objects as admission_objects
from agent_fleet.engine.core import check_run_options as check_run_options
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
