"""The worker pool: registry, assignment leases, reassignment on failure, graceful degradation.

A *worker* is anything that runs agent sessions (a harness task, a process, a Ray actor, a CLI
agent slot). Workers register with their capabilities and a maximum load; the pool hands out
:class:`Lease` objects when a session is assigned.

Invariants:

* A session has at most one current lease. Every (re)assignment bumps the lease's ``attempt``
  (a fencing token). :meth:`WorkerPool.release` answers False for a stale lease, and the caller must
  then drop that worker's outcome: a session reassigned to a backup is never run twice to
  completion.
* A backup resumes the session from its log (the runner calls ``wake(session_id)``), so a
  reassignment never restarts a session from scratch.
* The pool has the engine's capacity surface (:mod:`agent_fleet.capacity`): ``await acquire(sid)``
  waits, first come first served, until a worker is free; ``acquire_nowait`` raises
  :class:`~agent_fleet.capacity.CapacityFull` instead. A lease is reserved when granted, marked used
  when an attempt starts on it, and released with (``ok=``) or without a verdict on its worker. A
  depleted pool means fewer concurrent sessions, never a failed run.
* Idle workers (no session) are also kept in a heap by id, so the common assignment — least-loaded,
  where every idle worker ties at utilisation 0 and the smallest id wins — touches only the idle
  workers it skips instead of scanning the whole pool. It picks exactly what the full scan picks.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from agent_fleet.capacity import CapacityFull, CapacityStatistics, statistics_of
from agent_fleet.clock import Clock
from agent_fleet.dispatch.health import BreakerState, HealthConfig, HealthMonitor, Liveness
from agent_fleet.dispatch.port import Lease
from agent_fleet.dispatch.selection import Candidate, capability_weighted, form_team, least_loaded

__all__ = ["Lease", "PoolStats", "Reassignment", "WorkerPool", "WorkerSpec"]  # Lease is the port's


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSpec:
    worker_id: str
    skills: Mapping[str, float] = field(default_factory=dict)  # skill -> depth (> 0)
    models: frozenset[str] = frozenset()  # empty: any model
    tools: frozenset[str] = frozenset()  # empty: any tool
    max_load: int = 1

    def __post_init__(self) -> None:
        if self.max_load < 1:
            raise ValueError(f"worker {self.worker_id}: max_load must be at least 1")

    def serves(self, model: str | None, tools: Collection[str]) -> bool:
        if model is not None and self.models and model not in self.models:
            return False
        return not (tools and self.tools and not set(tools) <= self.tools)


@dataclass(frozen=True, slots=True)
class Reassignment:
    session_id: str
    from_worker: str
    reason: str  # "dead" | "hung" | "failed" | "timeout" | "at_risk"
    lease: Lease | None  # the backup's lease; None when no backup is free (queue the session)


@dataclass(frozen=True, slots=True)
class PoolStats(CapacityStatistics):
    """The capacity figures (``total_tokens``: slots of the workers that take work) and the pool's own."""

    workers: int
    admitting: int
    open_breakers: int
    dead: int
    hung: int
    load: int
    free_slots: int

    @property
    def degraded(self) -> bool:
        """Some registered workers take no work: the fleet runs fewer sessions at once."""
        return self.admitting < self.workers


class WorkerPool:
    def __init__(
        self,
        clock: Clock,
        *,
        health: HealthConfig | None = None,
        load_slack: int = 2,
    ) -> None:
        self._clock = clock
        self.health = HealthMonitor(clock, health)
        self._load_slack = load_slack
        self._specs: dict[str, WorkerSpec] = {}
        self._running: dict[str, set[str]] = {}  # worker -> session ids
        self._leases: dict[str, Lease] = {}  # session -> current lease
        self._attempts: dict[str, int] = {}  # session -> last attempt handed out
        self._idle: set[str] = set()  # workers with no session
        self._idle_heap: list[str] = []  # the idle ids (and stale ones, skipped lazily)
        self._multi = 0  # registered workers whose max_load is above 1
        self._used: set[str] = set()  # sessions whose current lease has an attempt running on it
        self._waiters: deque[tuple[asyncio.Future[Lease], str]] = deque()

    # -- registry -----------------------------------------------------------------------------
    def register(self, spec: WorkerSpec) -> None:
        old = self._specs.get(spec.worker_id)
        if old is not None and old.max_load > 1:
            self._multi -= 1
        if spec.max_load > 1:
            self._multi += 1
        self._specs[spec.worker_id] = spec
        self._running.setdefault(spec.worker_id, set())
        if not self._running[spec.worker_id]:
            self._mark_idle(spec.worker_id)
        if spec.worker_id not in self.health:
            self.health.add(spec.worker_id)
        self._serve()

    def _mark_idle(self, worker_id: str) -> None:
        if worker_id not in self._idle:
            self._idle.add(worker_id)
            heapq.heappush(self._idle_heap, worker_id)

    def deregister(self, worker_id: str) -> list[Reassignment]:
        """Remove a worker; its sessions move to backups (or come back with lease None)."""
        moved = self._evacuate(worker_id, "dead", count_failure=False)
        spec = self._specs.pop(worker_id, None)
        if spec is not None and spec.max_load > 1:
            self._multi -= 1
        self._idle.discard(worker_id)
        self._running.pop(worker_id, None)
        self.health.remove(worker_id)
        self._serve()
        return moved

    def heartbeat(self, worker_id: str, *, progress: object = None) -> None:
        if worker_id in self._specs:
            self.health.heartbeat(worker_id, progress=progress)

    def workers(self) -> tuple[str, ...]:
        return tuple(sorted(self._specs))

    def load(self, worker_id: str) -> int:
        return len(self._running.get(worker_id, ()))

    # -- assignment ---------------------------------------------------------------------------
    def _candidates(self, model: str | None, tools: Collection[str], exclude: Collection[str]) -> list[Candidate]:
        out: list[Candidate] = []
        for wid, spec in self._specs.items():
            if wid in exclude or not spec.serves(model, tools) or not self.health.admits_work(wid):
                continue
            load = self.load(wid)
            max_load = spec.max_load
            if self.health.breaker(wid) is BreakerState.HALF_OPEN:
                max_load = load + 1  # a probing worker takes exactly one session
            out.append(Candidate(wid, load, max_load, spec.skills))
        return out

    def _try(
        self,
        session_id: str,
        *,
        required_skills: Collection[str] = (),
        model: str | None = None,
        tools: Collection[str] = (),
        exclude: Collection[str] = (),
    ) -> Lease | None:
        """Assign a session to a worker now, or None when no worker is free (waiters aside)."""
        if session_id in self._leases:
            raise ValueError(f"session {session_id} already holds a lease")
        if not required_skills:
            idle = self._first_idle(model, tools, exclude)
            if idle is not None:
                return self._grant(session_id, idle)
            if not self._multi:
                return None  # every worker takes one session: no idle worker, no free slot
        cands = self._candidates(model, tools, exclude)
        pick = (
            capability_weighted(cands, required_skills, load_slack=self._load_slack)
            if required_skills
            else least_loaded(cands)
        )
        if pick is None:
            return None
        return self._grant(session_id, pick.worker_id)

    def acquire_nowait(
        self,
        session_id: str,
        *,
        required_skills: Collection[str] = (),
        model: str | None = None,
        tools: Collection[str] = (),
        exclude: Collection[str] = (),
    ) -> Lease:
        """A lease on a free worker now; :class:`CapacityFull` when none is free or others wait."""
        lease = None
        if not self._queued():
            lease = self._try(session_id, required_skills=required_skills, model=model, tools=tools, exclude=exclude)
        if lease is None:
            raise CapacityFull(f"no worker is free for {session_id} ({len(self._specs)} registered)")
        return lease

    async def acquire(self, session_id: str) -> Lease:
        """A lease on the next worker to come free, in the order the sessions asked."""
        if not self._queued():
            lease = self._try(session_id)
            if lease is not None:
                return lease
        fut: asyncio.Future[Lease] = asyncio.get_running_loop().create_future()
        self._waiters.append((fut, session_id))
        try:
            return await fut
        except BaseException:
            if fut.done() and not fut.cancelled():  # granted in the same instant: give it back
                self.release(fut.result())
            raise

    def _queued(self) -> bool:
        """Someone waits (cancelled waiters at the head are dropped first)."""
        while self._waiters and self._waiters[0][0].done():
            self._waiters.popleft()
        return bool(self._waiters)

    def _waiting(self) -> int:
        return sum(1 for fut, _ in self._waiters if not fut.done())

    def _serve(self) -> None:
        """Hand free workers to the waiters, oldest first; stop at the first that cannot be served."""
        while self._waiters:
            fut, sid = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            lease = self._try(sid)
            if lease is None:
                return
            self._waiters.popleft()
            fut.set_result(lease)

    def _first_idle(self, model: str | None, tools: Collection[str], exclude: Collection[str]) -> str | None:
        """The idle worker least-loaded selection would pick: the smallest admitting id."""
        skipped: list[str] = []
        pick: str | None = None
        heap = self._idle_heap
        while heap:
            wid = heapq.heappop(heap)
            if wid not in self._idle or (skipped and skipped[-1] == wid):
                continue  # stale (busy or gone since it was pushed) or a duplicate entry
            skipped.append(wid)
            spec = self._specs[wid]
            if wid in exclude or not spec.serves(model, tools) or not self.health.admits_work(wid):
                continue
            pick = wid
            break
        for wid in skipped:
            if wid != pick:
                heapq.heappush(heap, wid)
        return pick

    def _grant(self, session_id: str, worker_id: str) -> Lease:
        probe = self.health.breaker(worker_id) is BreakerState.HALF_OPEN
        if probe:
            self.health.start_probe(worker_id)
        attempt = self._attempts.get(session_id, 0) + 1
        self._attempts[session_id] = attempt
        lease = Lease(session_id, worker_id, attempt, probe, self._clock.now())
        self._leases[session_id] = lease
        self._running[worker_id].add(session_id)
        self._idle.discard(worker_id)
        self.health.set_busy(worker_id, True)
        return lease

    def is_current(self, lease: Lease) -> bool:
        return self._leases.get(lease.session_id) == lease

    def mark_used(self, lease: Lease) -> None:
        """An attempt starts on the lease (reserved until now)."""
        if self.is_current(lease):
            self._used.add(lease.session_id)

    def _drop(self, lease: Lease) -> None:
        self._leases.pop(lease.session_id, None)
        self._used.discard(lease.session_id)
        running = self._running.get(lease.worker_id)
        if running is not None:
            running.discard(lease.session_id)
            if not running and lease.worker_id in self._specs:
                self._mark_idle(lease.worker_id)
            if not running and lease.worker_id in self.health:
                self.health.set_busy(lease.worker_id, False)

    def release(self, lease: Lease, *, ok: bool | None = None, latency: float | None = None) -> bool:
        """Give a lease back. ``ok`` says how the session ended on its worker (counted in its
        health); None judges nothing (the session was preempted, paused between attempts, or its
        backup is not needed). False: the lease is stale, drop the outcome."""
        if not self.is_current(lease):
            return False
        took = self._clock.now() - lease.started_at if latency is None else latency
        self._drop(lease)
        if ok is None:
            if lease.probe and lease.worker_id in self.health:
                self.health.abort_probe(lease.worker_id)
        elif ok:
            self.health.record_success(lease.worker_id, took)
        else:
            self.health.record_failure(lease.worker_id, took)
        self._serve()
        return True

    def fail(
        self, lease: Lease, *, reason: str = "failed", latency: float | None = None, avoid: Collection[str] = ()
    ) -> Reassignment | None:
        """A session failed or timed out on its worker: count it, and move it to a backup, one of
        the workers in ``avoid`` (where it failed before) only when no other is free.

        Returns None for a stale lease (someone already moved the session).
        """
        if not self.is_current(lease):
            return None
        took = self._clock.now() - lease.started_at if latency is None else latency
        self._drop(lease)
        self.health.record_failure(lease.worker_id, took)
        tried = {lease.worker_id, *avoid}
        # A backup keeps the session's turn: it is granted before any waiter is served.
        backup = self._try(lease.session_id, exclude=tried)
        if backup is None and len(tried) > 1:  # only workers it failed on are free: not the last one
            backup = self._try(lease.session_id, exclude=(lease.worker_id,))
        self._serve()
        return Reassignment(lease.session_id, lease.worker_id, reason, backup)

    def _evacuate(self, worker_id: str, reason: str, *, count_failure: bool) -> list[Reassignment]:
        moved: list[Reassignment] = []
        for sid in sorted(self._running.get(worker_id, set())):
            lease = self._leases[sid]
            self._drop(lease)
            if count_failure:
                self.health.record_failure(worker_id)
            backup = self._try(sid, exclude=(worker_id,))
            moved.append(Reassignment(sid, worker_id, reason, backup))
        return moved

    def check(self) -> list[Reassignment]:
        """Run the health checks: sessions on dead, hung or at-risk workers move to backups."""
        moved: list[Reassignment] = []
        for wid, state in self.health.unhealthy().items():
            if self._running.get(wid):
                moved.extend(self._evacuate(wid, str(state), count_failure=True))
        for wid in self.health.at_risk():
            if self._running.get(wid) and self._candidates(None, (), (wid,)):
                moved.extend(self._evacuate(wid, "at_risk", count_failure=False))
        self._serve()  # breakers that half-opened meanwhile take waiters too
        return moved

    def team(self, required: Collection[str]) -> tuple[str, ...] | None:
        """The smallest set of healthy workers that together cover ``required``."""
        picked = form_team(self._candidates(None, (), ()), required)
        return None if picked is None else tuple(c.worker_id for c in picked)

    # -- reads --------------------------------------------------------------------------------
    def free_slots(self) -> int:
        return sum(c.free for c in self._candidates(None, (), ()))

    @property
    def total(self) -> int:
        """Sessions the workers that take work could hold at once (a probing worker: one)."""
        return sum(c.max_load for c in self._candidates(None, (), ()))

    def statistics(self) -> PoolStats:
        unhealthy = self.health.unhealthy()
        used = len(self._used)
        cap = statistics_of(self.total, len(self._leases) - used, used, self._waiting(), dict.fromkeys(self._leases, 1))
        return PoolStats(
            total_tokens=cap.total_tokens,
            reserved=cap.reserved,
            in_use=cap.in_use,
            tasks_waiting=cap.tasks_waiting,
            borrowers=cap.borrowers,
            workers=len(self._specs),
            admitting=sum(1 for w in self._specs if self.health.admits_work(w)),
            open_breakers=sum(1 for w in self._specs if self.health.breaker(w) is BreakerState.OPEN),
            dead=sum(1 for s in unhealthy.values() if s is Liveness.DEAD),
            hung=sum(1 for s in unhealthy.values() if s is Liveness.HUNG),
            load=len(self._leases),
            free_slots=self.free_slots(),
        )

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<WorkerPool {s.borrowed_tokens}/{s.total_tokens} ({s.reserved} reserved, {s.in_use} in use), "
            f"{s.tasks_waiting} waiting; workers={s.workers} admitting={s.admitting} free={s.free_slots}>"
        )
