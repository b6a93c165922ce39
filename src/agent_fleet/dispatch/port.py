"""The dispatch port: what other planes may use of the dispatcher.

A :class:`Lease` is a session's assignment to one worker (its ``attempt`` is the fencing token). An
:data:`Interposer` wraps what an attempt on a given worker uses: the engine passes one to the
dispatcher for fault injection (:mod:`agent_fleet.testing.faults`) or tracing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["Interposer", "Lease"]


@dataclass(frozen=True, slots=True)
class Lease:
    session_id: str
    worker_id: str
    attempt: int  # fencing token: 1 for the first assignment, +1 on every reassignment
    probe: bool = False  # this assignment is the half-open breaker's probe
    started_at: float = 0.0


Interposer = Callable[[Lease, SessionLog, ModelGateway], tuple[SessionLog, ModelGateway]]
"""Wraps what an attempt on a given worker uses (fault injection, tracing)."""
