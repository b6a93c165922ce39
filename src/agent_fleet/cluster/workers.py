"""Workers on a Ray cluster: the dispatcher's side of the Ray executor.

A *node worker* is an async Ray actor pinned to one node (:mod:`agent_fleet.cluster.node`); it runs
many attempts at once, each a harness that wakes its session from the session log in PostgreSQL and
calls the model through the run's one gateway service. Here, in the engine's process, each node
worker is a worker of the ordinary :class:`~agent_fleet.dispatch.pool.WorkerPool`, so admission, the
run's lease, leases on workers, reassignment and the breaker stay the dispatcher's:

* :func:`node_capacity` — how many sessions a node holds, from its Ray resources and what one session
  asks for (``num_cpus``, ``memory``, custom resources): placement follows the session's requests, and
  a node without a resource a session needs gets no worker.
* :class:`RayWorkerPool` — a node worker is alive while Ray says so: once its actor or node is lost
  (:meth:`RayWorkerPool.lose`), the dispatcher's heartbeats for it are dropped, the health check finds
  it dead after ``dead_after`` and its sessions move to backups on other nodes, which resume them from
  the log.
* :class:`RayBody` — the :data:`~agent_fleet.dispatch.attempt.SessionBody` that runs one attempt on
  its leased node worker. Before the attempt it moves the session's *attempt fence* on
  (:func:`~agent_fleet.session.lease.bump_attempt_fence`) and hands the new epoch to the node, whose
  writes carry it; when the attempt ends without an outcome (its node lost, moved, preempted,
  timed out) it moves the fence on again, so whatever the lost node still tries to write is refused
  by the store. The node answers with a plain record (:func:`answer_of` reads it): an outcome, or an
  error the dispatcher classifies as if it had been raised here.

Ray is imported on first use: an engine that runs locally never loads it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_fleet import errors
from agent_fleet.brain.port import Limits
from agent_fleet.dispatch.attempt import Attempt, AttemptFailed
from agent_fleet.dispatch.pool import WorkerPool
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.domain.plan import Partition
from agent_fleet.errors import FleetError, LeaseLost
from agent_fleet.hands.port import WorkspaceChanges

__all__ = [
    "AttemptOrder",
    "NodeWorker",
    "RayBody",
    "RayWorkerPool",
    "SessionRequest",
    "WorkerLost",
    "answer_of",
    "error_answer",
    "node_capacity",
]

log = logging.getLogger(__name__)


class WorkerLost(FleetError):
    """The node worker running an attempt is gone (its actor, its process or its node died)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequest:
    """What one session asks of the node that runs it (fleet.yaml ``dispatch.ray``)."""

    num_cpus: float = 0.01
    memory: int = 0  # bytes
    resources: Mapping[str, float] = field(default_factory=dict)

    def actor_options(self, sessions: int) -> dict[str, Any]:
        """Ray resources a node worker holding ``sessions`` sessions reserves."""
        options: dict[str, Any] = {"num_cpus": round(self.num_cpus * sessions, 4)}
        if self.memory:
            options["memory"] = self.memory * sessions
        if self.resources:
            options["resources"] = {k: round(v * sessions, 4) for k, v in self.resources.items()}
        return options


def node_capacity(available: Mapping[str, float], request: SessionRequest, *, most: int) -> int:
    """How many sessions fit in a node's ``available`` Ray resources (at most ``most``); 0 when the
    node lacks a resource the session asks for."""
    asks = {"CPU": request.num_cpus, "memory": float(request.memory), **request.resources}
    fits = most
    for name, amount in asks.items():
        if amount <= 0:
            continue
        fits = min(fits, math.floor(available.get(name, 0.0) / amount + 1e-9))
    return max(0, fits)


@dataclass(frozen=True, slots=True)
class NodeWorker:
    """A node worker as the pool knows it: its id in the pool, its node and its actor handle."""

    worker_id: str
    node_id: str
    actor: Any
    sessions: int


class RayWorkerPool(WorkerPool):
    """A worker pool whose node workers live only while Ray says they do."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost: set[str] = set()

    def lose(self, worker_id: str) -> bool:
        """Ray reported the worker's actor or node dead; True the first time."""
        if worker_id in self.lost:
            return False
        self.lost.add(worker_id)
        log.warning("node worker %s is lost; its sessions move to other nodes", worker_id)
        return True

    def heartbeat(self, worker_id: str, *, progress: object = None) -> None:
        if worker_id not in self.lost:  # a lost worker's silence makes the health check find it dead
            super().heartbeat(worker_id, progress=progress)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptOrder:
    """What a node worker is sent to run one attempt."""

    session_id: str
    partition: Partition
    number: int
    worker_id: str
    fence: int  # the session's attempt fence: the node's writes carry it
    run_id: str
    run_epoch: int | None  # the run's lease epoch (the engine's); the node's writes carry it too
    token: str  # the session's harness token for the gateway service
    limits: Limits
    input_root: str | None = None  # a directory input's root (the node must see it, e.g. a shared file system)
    # the run keeps its sessions' changes: the node's sandboxes are worktrees of its base, and a
    # session's change is recorded in its log by the node (it never stays on the node's disk)
    changes: WorkspaceChanges | None = None


def error_answer(exc: BaseException) -> dict[str, Any]:
    """How a node reports an attempt that raised (:func:`answer_of` raises it again in the engine)."""
    if isinstance(exc, AttemptFailed):
        return {"error": "AttemptFailed", "message": str(exc), "kind": exc.kind}
    if isinstance(exc, TimeoutError):
        return {"error": "TimeoutError", "message": str(exc)}
    if isinstance(exc, FleetError):
        attrs = {k: getattr(exc, k) for k in ("status", "retry_after", "outage", "scope") if hasattr(exc, k)}
        return {"error": type(exc).__name__, "message": str(exc), "attrs": attrs}
    return {"error": "crash", "message": f"{type(exc).__name__}: {exc}"}


def answer_of(session_id: str, answer: Mapping[str, Any], worker_id: str) -> SessionOutcome:
    """The attempt's outcome, or the error it ended in, raised as the dispatcher classifies it:
    a provider error stays one, a store failure on the node (other than a fence) is the node's."""
    error = answer.get("error")
    if error is None:
        return SessionOutcome(session_id, Outcome(str(answer["outcome"])), str(answer.get("reason") or ""))
    message = str(answer.get("message", ""))
    if error == "AttemptFailed":
        raise AttemptFailed(message, kind=str(answer.get("kind")))
    if error == "TimeoutError":
        raise TimeoutError(message)
    cls = getattr(errors, str(error), None)
    if not (isinstance(cls, type) and issubclass(cls, FleetError)) or error == "crash":
        raise WorkerLost(f"the attempt crashed on {worker_id}: {message}")
    if issubclass(cls, errors.StoreError) and not issubclass(cls, LeaseLost):
        raise WorkerLost(f"{worker_id} cannot use the session store: {message}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    for key, value in dict(answer.get("attrs") or {}).items():
        setattr(exc, key, value)
    raise exc


class RayBody:
    """Runs each attempt on the node worker its lease names (see the module docstring)."""

    def __init__(
        self,
        *,
        workers: Mapping[str, NodeWorker],
        pool: RayWorkerPool,
        fence: Callable[[str], Awaitable[int]],
        token: Callable[[str], str],
        run_id: str,
        run_epoch: int | None,
        limits: Limits,
        input_root: str | None = None,
        changes: WorkspaceChanges | None = None,
        lost_errors: tuple[type[BaseException], ...] = (),
        cancel: Callable[[Any], None] | None = None,
    ) -> None:
        self._workers = workers
        self._pool = pool
        self._fence = fence
        self._token = token
        self._run_id = run_id
        self._run_epoch = run_epoch
        self._limits = limits
        self._root = input_root
        self._changes = changes
        self._lost_errors = lost_errors  # what awaiting a dead actor raises (ray.exceptions.RayActorError, ...)
        self._cancel = cancel
        self.placed: Counter[str] = Counter()  # attempts started, by node worker

    async def __call__(self, attempt: Attempt) -> SessionOutcome:
        sid, wid = attempt.session_id, attempt.lease.worker_id
        worker = self._workers[wid]
        order = AttemptOrder(
            session_id=sid,
            partition=attempt.partition,
            number=attempt.number,
            worker_id=wid,
            fence=await self._fence(sid),
            run_id=self._run_id,
            run_epoch=self._run_epoch,
            token=self._token(sid),
            limits=self._limits,
            input_root=self._root,
            changes=self._changes,
        )
        ref = worker.actor.run.remote(order)
        self.placed[wid] += 1
        try:
            with attempt.progress.bounded_wait():  # the node's own progress is its writes, not seen here
                answer = await ref
        except asyncio.CancelledError:
            if self._cancel is not None:
                self._cancel(ref)
            await asyncio.shield(self._fence(sid))  # declared over: its late writes are refused from here on
            raise
        except self._lost_errors as exc:
            self._pool.lose(wid)
            await self._fence(sid)
            raise WorkerLost(f"node worker {wid} on node {worker.node_id[:12]} died: {type(exc).__name__}") from None
        try:
            return answer_of(sid, answer, wid)
        except (Exception, asyncio.CancelledError):
            await asyncio.shield(self._fence(sid))
            raise

    def __repr__(self) -> str:
        return f"<RayBody workers={len(self._workers)} lost={len(self._pool.lost)}>"
