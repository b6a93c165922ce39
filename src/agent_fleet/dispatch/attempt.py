"""What the dispatcher is told, what it counts, and what it keeps per session (runner.py).

:class:`DispatchOptions` are the dispatcher's limits (attempt timeout, attempts and reassignments
allowed, backoff, health rounds, start-ahead); :class:`DispatchStats` its live counts. An
:class:`Attempt` is what a :data:`SessionBody` is given: one attempt of one session on one worker,
with the attempt's own views of the ports. A body raises :class:`AttemptFailed` for a failure that is
the session's own. :class:`Live`, :class:`Tally` and :class:`End` are the dispatcher's bookkeeping:
a session while it holds its admission slot, its attempts so far, and how one attempt ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.brain.port import Limits
from agent_fleet.capacity import Permit
from agent_fleet.dispatch.pool import Reassignment
from agent_fleet.dispatch.port import Lease
from agent_fleet.dispatch.watch import Progress
from agent_fleet.domain.attempts import AttemptKind
from agent_fleet.domain.outcomes import SessionOutcome
from agent_fleet.domain.plan import Partition
from agent_fleet.errors import FleetError
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = [
    "BACKOFF",
    "PREEMPTED",
    "Attempt",
    "AttemptFailed",
    "DispatchOptions",
    "DispatchStats",
    "End",
    "Live",
    "Preempted",
    "SessionBody",
    "Tally",
]

BACKOFF = frozenset({AttemptKind.PROVIDER, AttemptKind.AGENT})  # wait outside the slot before the next attempt


class AttemptFailed(FleetError):
    """A session body reports a failure that is the session's own, not its worker's
    (e.g. a CLI agent exited non-zero). ``kind`` names it in the ``attempt_failed`` event."""

    def __init__(self, message: str, *, kind: str = AttemptKind.AGENT) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchOptions:
    session_timeout: float | None = None  # seconds per attempt; None = no limit
    max_attempts: int = 3  # attempts failed on the session's account (timeout, provider, agent)
    max_reassignments: int = 10  # attempts lost to worker faults (crash, hang)
    retry_backoff: float = 1.0  # seconds × failures so far, before a provider/agent retry
    check_interval: float = 1.0  # seconds between health rounds (heartbeats, hung, at-risk)
    # sessions of the built-in harness starting at once, from waking to their first model call (starts.py)
    start_ahead: int = 64
    # sessions of the built-in harness woken at once, from waking to leaving their slot (starts.py);
    # None: every admitted session
    resident: int | None = None
    limits: Limits = field(default_factory=Limits)


@dataclass(slots=True)
class DispatchStats:
    total: int = 0
    queued: int = 0  # waiting for admission or between attempts
    active: int = 0  # admitted (running, or waiting for a worker)
    completed: int = 0
    failed: int = 0
    paused: int = 0
    preempted: int = 0
    attempts_failed: int = 0
    reassigned: int = 0  # attempts moved to a backup worker
    waiting_for_worker: int = 0  # admitted sessions queued because no worker is free


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of one session on one worker. ``log`` and ``gateway`` are the attempt's own
    views of the ports: use them (not the engine's) so progress and cancellation work."""

    session_id: str
    partition: Partition
    number: int
    lease: Lease
    log: SessionLog
    gateway: ModelGateway
    progress: Progress


SessionBody = Callable[[Attempt], Awaitable[SessionOutcome]]
"""Runs a session's attempt to its outcome: the built-in harness, or a CLI agent."""


@dataclass(slots=True)
class Live:
    """A session while it holds its admission slot."""

    slot: Permit  # the admission slot it holds
    lease: Lease | None = None  # current lease (None: waiting for a worker)
    task: asyncio.Task[SessionOutcome] | None = None  # the running attempt
    progress: Progress | None = None
    # waiting for a worker or a resident place, in a task preemption can cancel
    waiter: asyncio.Future[Any] | None = None
    residence: Permit | None = None  # its resident place (starts.Residence), while it holds one
    moved: Reassignment | None = None  # the health check took this attempt's lease
    preempt_reason: str | None = None
    preempted_by: str | None = None
    failed_on: set[str] = field(default_factory=set)  # workers this session crashed or timed out on


@dataclass(slots=True)
class Tally:
    number: int = 0  # attempts started
    failures: int = 0  # on the session's account
    faults: int = 0  # on workers' accounts


@dataclass(frozen=True, slots=True)
class End:
    outcome: SessionOutcome | None = None
    kind: str | None = None  # why the attempt ended without an outcome
    error: str = ""
    worker: str = ""
    outage: bool = False  # the provider was down for everyone: not the session's fault


class Preempted(FleetError):
    """Admission took the slot back while the session waited for a worker."""


PREEMPTED = End(kind=AttemptKind.PREEMPTED)
