"""Dispatch: run every admitted session to an end on a pool of workers, surviving failures.

Other planes use :mod:`agent_fleet.dispatch.port`; the dispatcher, the worker pool and the CLI-agent
session body are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports
from agent_fleet.dispatch.port import Interposer, Lease

if TYPE_CHECKING:
    from agent_fleet.dispatch.pool import WorkerPool, WorkerSpec
    from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions, DispatchStats

__all__ = ["DispatchOptions", "DispatchStats", "Dispatcher", "Interposer", "Lease", "WorkerPool", "WorkerSpec"]

__getattr__ = lazy_exports(
    __name__,
    {
        "DispatchOptions": "agent_fleet.dispatch.runner",
        "DispatchStats": "agent_fleet.dispatch.runner",
        "Dispatcher": "agent_fleet.dispatch.runner",
        "WorkerPool": "agent_fleet.dispatch.pool",
        "WorkerSpec": "agent_fleet.dispatch.pool",
    },
)
