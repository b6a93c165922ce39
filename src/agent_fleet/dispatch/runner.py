"""The dispatcher: run every session of a plan to an end, surviving failures.

Admission decides *whether* a session may run (its slot); the worker pool decides *where* (a lease
on a worker: the execution slot the session's harness runs on — a logical slot in this process
today, a Ray actor tomorrow). Each session is driven by one coroutine: take a slot, take a lease,
run an attempt on the leased worker, give both back. Every attempt wakes the session from its log,
so a session is never restarted from scratch.

What a failed attempt costs, by cause:

* **crash** (the attempt raised) or **hung** (its worker made no progress for ``hung_after``): the
  worker is charged a failure (``trip_after`` in a row open its breaker: it leaves the pool until a
  half-open probe succeeds) and the session moves at once to a backup worker, keeping its admission
  slot; after ``max_reassignments`` such losses the session fails for good;
* **timeout** (``session_timeout``): the same, and it counts toward ``max_attempts``;
* **provider** (the model provider failed past the gateway's retries) or **agent** (a CLI agent
  failed): the worker is not to blame; the session waits ``retry_backoff × n`` outside its slot and
  counts toward ``max_attempts``;
* **moved**: the worker's risk score (recent failures and latency trend) says it is about to fail;
  the session moves to a backup, nobody is charged;
* **preempted** by admission: the lease goes back uncharged, the session queues for a slot again.

An attempt whose lease moved is cancelled, and the writes it had started are allowed to land before
the backup wakes the session, so a result is never recorded by two attempts. When no worker is free
a session waits for one in FIFO order: a depleted pool means fewer sessions at once, never a failed
run. ``attempt_failed`` events say ``{attempt, kind, error, worker}``.

Seams: a :data:`SessionBody` runs one attempt — by default a brain built by the
:class:`~agent_fleet.brain.port.BrainFactory` the dispatcher is given (the engine passes the built-in
harness), or CLI agents (:mod:`agent_fleet.dispatch.cli_session`); an
:data:`~agent_fleet.dispatch.port.Interposer` wraps what an attempt on a given worker uses (fault
injection). Workers here are slots of this process, so :meth:`Dispatcher.check`
heartbeats them itself; workers elsewhere (Ray actors) would send their own heartbeats and progress
to the same pool, and their body would wake the session on the actor.

The options, the counts, the :class:`Attempt` a body is given and the dispatcher's per-session
bookkeeping are :mod:`agent_fleet.dispatch.attempt`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agent_fleet.brain.port import BrainFactory
from agent_fleet.capacity import Capacity, CapacityFull, P
from agent_fleet.clock import Clock, RealClock, timeout
from agent_fleet.dispatch.attempt import (
    BACKOFF,
    PREEMPTED,
    Attempt,
    AttemptFailed,
    DispatchOptions,
    DispatchStats,
    End,
    Live,
    Preempted,
    SessionBody,
    Tally,
)
from agent_fleet.dispatch.autoscale import Autoscaler
from agent_fleet.dispatch.health import HealthConfig
from agent_fleet.dispatch.pool import Reassignment, WorkerPool, WorkerSpec
from agent_fleet.dispatch.port import Interposer, Lease
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.dispatch.starts import Residence, StartGate
from agent_fleet.dispatch.watch import Progress, TurnBoundary, WatchedGateway, WatchedHands, WatchedLog
from agent_fleet.domain.attempts import SESSION_FAULTS, WORKER_FAULTS, AttemptKind
from agent_fleet.domain.events import EventType
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.domain.plan import Partition
from agent_fleet.errors import ProviderError, StoreError, UnreachableError, UsageError
from agent_fleet.hands.port import Hands
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = [
    "Attempt",
    "AttemptFailed",
    "DispatchOptions",
    "DispatchStats",
    "Dispatcher",
    "Interposer",
    "SessionBody",
]

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        *,
        log: SessionLog,
        gateway: ModelGateway,
        hands_for: Callable[[Partition], Hands],
        slots: SessionSlots,
        clock: Clock | None = None,
        options: DispatchOptions | None = None,
        pool: WorkerPool | None = None,
        brain: BrainFactory | None = None,
        body: SessionBody | None = None,
        interpose: Interposer | None = None,
        autoscaler: Autoscaler | None = None,
    ) -> None:
        self._log = log
        self._gateway = gateway
        self._hands_for = hands_for
        self._slots = slots
        self._clock = clock or RealClock()
        self._opts = options or DispatchOptions()
        # Without a pool of its own choosing, one local worker per session: the pool never limits.
        self._grow = pool is None and autoscaler is None
        self.pool = pool or WorkerPool(self._clock, health=HealthConfig(hung_after=600.0))
        self._autoscaler = autoscaler
        self._scaled = 0  # workers the autoscaler started, for their ids
        if body is None and brain is None:
            raise TypeError("a dispatcher needs a brain (the built-in harness) or a session body")
        self._brain = brain
        self._body: SessionBody = body or self._run_harness
        # CLI agents call the gateway service, not this gateway: their first call is not seen here
        self._starts = StartGate(self._opts.start_ahead) if body is None else None
        resident = self._opts.resident
        self._resident = Residence(resident) if body is None and resident is not None else None
        self._interpose = interpose
        self._live: dict[str, Live] = {}
        self._restored: set[str] = set()
        self._tick = 0
        self._last_check: float | None = None
        self.stats = DispatchStats()
        slots.set_preempt_hook(self.preempt)

    # -- control ---------------------------------------------------------------------------------
    def preempt(self, session_id: str, reason: str, by: str | None = None) -> None:
        """Stop a running session's attempt (at its turn boundary when a model call is in flight); it
        pauses and waits for a slot again."""
        live = self._live.get(session_id)
        if live is None:
            return
        live.preempt_reason = reason
        live.preempted_by = by
        if live.task is not None and not live.task.done():
            if live.progress is not None and live.progress.calls:
                live.progress.drain = True  # the call in flight is answered and recorded first
            else:
                live.task.cancel()
        elif live.waiter is not None and not live.waiter.done():
            live.waiter.cancel()

    def check(self) -> list[Reassignment]:
        """One health round: heartbeats of this process's workers (with each one's progress), then
        sessions on hung or at-risk workers move to backups. Returns the moves."""
        self._tick += 1
        now = self._clock.now()
        # A round that comes late means this process itself was stalled (CPU starved, a long GC):
        # nobody could make progress meanwhile, so the stall is not held against any worker.
        stalled = self._last_check is not None and now - self._last_check > 2 * self._opts.check_interval
        self._last_check = now
        held = {live.lease.worker_id: live for live in self._live.values() if live.lease is not None}
        for wid in self.pool.workers():
            live = held.get(wid)
            progress: object = None
            if live is not None:
                if stalled or live.progress is None:  # between two attempts the dispatcher holds it
                    progress = ("tick", self._tick)
                else:
                    progress = live.progress.marker(self._tick)
            self.pool.heartbeat(wid, progress=progress)
        moves = self.pool.check()
        for move in moves:
            live = self._live.get(move.session_id)
            if live is None:  # cannot happen while leases live only inside Live; stay safe
                if move.lease is not None:
                    self.pool.release(move.lease)
                continue
            running_here = live.task is not None and not live.task.done()
            live.lease = move.lease
            if running_here and live.task is not None:
                live.moved = move
                live.task.cancel()
        return moves

    # -- running ---------------------------------------------------------------------------------
    async def run(self, sessions: list[tuple[str, Partition]]) -> dict[str, SessionOutcome]:
        self.stats.total += len(sessions)
        self.stats.queued += len(sessions)
        if self._grow:
            for n in range(len(self.pool.workers()), self.stats.total):
                self.pool.register(WorkerSpec(worker_id=f"local-{n:05d}"))
        outcomes: dict[str, SessionOutcome] = {}
        async with asyncio.TaskGroup() as tg:
            monitor = tg.create_task(self._monitor())
            drives = [tg.create_task(self._drive(sid, partition, outcomes)) for sid, partition in sessions]
            if drives:
                await asyncio.wait(drives)
            monitor.cancel()
        return outcomes

    async def _monitor(self) -> None:
        while True:
            await self._clock.sleep(self._opts.check_interval)
            self.check()
            self.scale()

    def scale(self) -> int:
        """One autoscaling decision: start workers for the queue, stop idle ones after a lull.
        Returns the change in the number of workers."""
        if self._autoscaler is None:
            return 0
        workers = self.pool.workers()
        busy = sum(1 for w in workers if self.pool.load(w))
        want = self._autoscaler.desired(current=len(workers), busy=busy, queued=self.stats.waiting_for_worker)
        change = want - len(workers)
        for _ in range(max(0, change)):
            self.pool.register(WorkerSpec(worker_id=f"auto-{self._scaled:05d}"))
            self._scaled += 1
        idle = [w for w in workers if not self.pool.load(w)]
        for w in idle[: max(0, -change)]:
            self.pool.deregister(w)  # idle: nothing to move
        return change

    async def _drive(self, sid: str, partition: Partition, outcomes: dict[str, SessionOutcome]) -> None:
        tally = Tally()
        while True:
            slot = await self._slots.acquire(sid)
            self.stats.queued -= 1
            self.stats.active += 1
            live = self._live[sid] = Live(slot)
            try:
                end = await self._admitted(sid, partition, live, tally)
            finally:
                self._live.pop(sid, None)
                if live.lease is not None:  # a backup that no attempt used
                    self.pool.release(live.lease)
                if live.residence is not None and self._resident is not None:
                    self._resident.release(live.residence)
                self.stats.active -= 1
                self._slots.release(slot)
            if end.outcome is not None:
                self._count(end.outcome)
                outcomes[sid] = end.outcome
                return
            self.stats.queued += 1
            if end.kind in BACKOFF:
                await self._clock.sleep(self._opts.retry_backoff * tally.failures)

    async def _admitted(self, sid: str, partition: Partition, live: Live, tally: Tally) -> End:
        """Attempts while the session holds its slot: reassignments keep the slot."""
        while True:
            if live.preempt_reason is not None:
                return await self._preempted(sid, live)
            try:
                if live.residence is None and self._resident is not None:
                    live.residence = await self._waited(sid, live, self._resident)
                    self._resident.mark_used(live.residence)
                if live.lease is None:
                    live.lease = await self._take_lease(sid, live)
            except Preempted:
                return await self._preempted(sid, live)
            leave = await self._enter_start(sid)
            if live.preempt_reason is not None:
                leave()
                continue
            self._slots.mark_used(live.slot)  # the slot runs an attempt from now on
            tally.number += 1
            try:
                end = await self._attempt(sid, partition, tally.number, live, leave)
            finally:
                leave()
            if end.outcome is not None:
                return end
            if end.kind == AttemptKind.PREEMPTED:
                return await self._preempted(sid, live)
            kind = end.kind or AttemptKind.CRASH
            self.stats.attempts_failed += 1
            if kind in SESSION_FAULTS and not end.outage:  # an outage ends the run (exit 4), not the session
                tally.failures += 1
            if kind in WORKER_FAULTS:
                tally.faults += 1
            failed = {"attempt": tally.number, "kind": kind, "error": end.error, "worker": end.worker}
            await self._log.emit_event(sid, EventType.ATTEMPT_FAILED, failed)
            give_up = tally.failures >= self._opts.max_attempts or tally.faults >= self._opts.max_reassignments
            if kind == AttemptKind.CONFIG:
                give_up = True
            if give_up:
                attempts = tally.number
                await self._log.emit_event(sid, EventType.SESSION_FAILED, {"error": end.error, "attempts": attempts})
                return End(outcome=SessionOutcome(sid, Outcome.FAILED, end.error))
            if kind in BACKOFF:
                return end
            self.stats.reassigned += 1

    async def _preempted(self, sid: str, live: Live) -> End:
        self.stats.preempted += 1
        data = {"reason": live.preempt_reason or "", "by": live.preempted_by}
        await self._log.emit_event(sid, EventType.SESSION_PREEMPTED, data)
        return PREEMPTED

    async def _enter_start(self, sid: str) -> Callable[[], None]:
        """A place in the start gate; returns the idempotent ``leave`` that gives it back."""
        starts = self._starts
        if starts is None:
            return lambda: None
        permit = await starts.acquire(sid)
        starts.mark_used(permit)

        def leave() -> None:
            starts.release(permit)

        return leave

    async def _take_lease(self, sid: str, live: Live) -> Lease:
        """A worker for the session, waiting in FIFO order while none is free."""
        self.stats.waiting_for_worker += 1
        try:
            return await self._waited(sid, live, self.pool)
        finally:
            self.stats.waiting_for_worker -= 1

    async def _waited(self, sid: str, live: Live, capacity: Capacity[P]) -> P:
        """A permit of ``capacity`` for the session, waiting in FIFO order while none is free; the
        wait is ``live.waiter``, which preemption cancels (then :class:`Preempted` is raised)."""
        try:
            permit = capacity.acquire_nowait(sid)
        except CapacityFull:
            waiter = live.waiter = asyncio.ensure_future(capacity.acquire(sid))  # awaited right here
            try:
                permit = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    capacity.release(waiter.result())  # granted in the same instant: give it back
                me = asyncio.current_task()
                if live.preempt_reason is not None and not (me is not None and me.cancelling()):
                    raise Preempted from None
                raise
            finally:
                live.waiter = None
        return permit

    async def _attempt(
        self, sid: str, partition: Partition, number: int, live: Live, first_call: Callable[[], None]
    ) -> End:
        lease = live.lease
        assert lease is not None
        progress = Progress()
        watched = WatchedLog(self._log, progress)
        att_log: SessionLog = watched
        att_gateway: ModelGateway = WatchedGateway(self._gateway, progress, self._restored, on_call=first_call)
        if self._interpose is not None:
            att_log, att_gateway = self._interpose(lease, att_log, att_gateway)
        attempt = Attempt(sid, partition, number, lease, att_log, att_gateway, progress)
        self.pool.mark_used(lease)
        started = self._clock.now()
        # A task of its own so that preemption and health moves can cancel this attempt without
        # cancelling the run; it is awaited right here, never left behind.
        task = asyncio.create_task(self._timed(attempt))
        live.task, live.progress, live.moved = task, progress, None
        kind: str | None = None
        error = ""
        outage = False
        outcome: SessionOutcome | None = None
        try:
            outcome = await task
        except TimeoutError:
            kind, error = AttemptKind.TIMEOUT, f"timed out after {self._opts.session_timeout} s"
        except (ProviderError, UnreachableError) as exc:
            if exc.exit_code == 4 and isinstance(exc, ProviderError):
                raise  # refused credentials: no attempt can succeed; the run stops, resumable
            kind, error = AttemptKind.PROVIDER, str(exc)
            outage = bool(getattr(exc, "outage", False))
        except AttemptFailed as exc:
            kind, error = exc.kind, str(exc)
        except TurnBoundary:
            kind = AttemptKind.PREEMPTED
        except UsageError as exc:  # a misconfigured toolset will not get better on another worker
            kind, error = AttemptKind.CONFIG, str(exc)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise
            if live.moved is not None:
                kind = AttemptKind.MOVED if live.moved.reason == "at_risk" else live.moved.reason
                error = f"worker {lease.worker_id} is {live.moved.reason}"
            elif live.preempt_reason is not None:
                kind = AttemptKind.PREEMPTED
            else:
                raise
        except StoreError:
            raise  # the log itself failed: no other worker can do better; the run stops (exit 4)
        except Exception as exc:  # the worker died under the attempt
            kind, error = AttemptKind.CRASH, f"{type(exc).__name__}: {exc}"
            log.info("session %s crashed on worker %s: %s", sid, lease.worker_id, error)
        finally:
            live.task = live.progress = None
            await watched.settle()
        took = self._clock.now() - started
        self._settle_lease(live, lease, kind, took)
        if outcome is not None:
            return End(outcome=outcome)
        return End(kind=kind, error=error, worker=lease.worker_id, outage=outage)

    def _settle_lease(self, live: Live, lease: Lease, kind: str | None, took: float) -> None:
        """Report the attempt to the pool; afterwards ``live.lease`` is the backup, if any."""
        if live.moved is not None:
            pass  # the health check already charged the worker and moved the lease
        elif kind is None:
            if not self.pool.release(lease, ok=True, latency=took) and live.lease is not None:
                self.pool.release(live.lease)  # moved in the same instant it finished: the log has it
            live.lease = None
        elif kind in (AttemptKind.CRASH, AttemptKind.TIMEOUT):
            live.failed_on.add(lease.worker_id)
            moved = self.pool.fail(
                lease, reason="timeout" if kind == AttemptKind.TIMEOUT else "failed", latency=took, avoid=live.failed_on
            )
            if moved is not None:
                live.lease = moved.lease
        else:  # provider, agent, config, preempted: not the worker's doing
            self.pool.release(lease)
            live.lease = None
        live.moved = None

    async def _timed(self, attempt: Attempt) -> SessionOutcome:
        if self._opts.session_timeout is None:
            return await self._body(attempt)
        async with timeout(self._clock, self._opts.session_timeout):  # on the injected clock
            return await self._body(attempt)

    async def _run_harness(self, attempt: Attempt) -> SessionOutcome:
        assert self._brain is not None  # checked in __init__: without a body there is a brain
        hands = WatchedHands(self._hands_for(attempt.partition), attempt.progress)
        try:
            brain = self._brain(log=attempt.log, gateway=attempt.gateway, hands=hands, limits=self._opts.limits)
            return await brain.run(attempt.session_id, attempt=attempt.number)
        finally:
            await hands.aclose()

    def _count(self, outcome: SessionOutcome) -> None:
        if outcome.outcome is Outcome.COMPLETED:
            self.stats.completed += 1
        elif outcome.outcome is Outcome.PAUSED:
            self.stats.paused += 1
        else:
            self.stats.failed += 1

    def __repr__(self) -> str:
        s = self.stats
        return f"Dispatcher(total={s.total}, active={s.active}, queued={s.queued}, pool={self.pool!r})"
