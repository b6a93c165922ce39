"""One run an engine drives, from its first session to its report: :class:`RunCoordinator`.

The coordinator owns the run's TaskGroup: the sessions (its dispatcher, behind a
:class:`~agent_fleet.engine.door.RunDoor`), the admission cycles, the provider watch, the ticker
(budget raises, paused sessions, snapshots), the live deduplication and the verification that starts
while the last sessions still run (:mod:`agent_fleet.engine.verification`). When no session is left
the final pass clusters what live deduplication has not, the sample is settled and the report is
written from the state they built; in :meth:`RunCoordinator.run` all of that overlaps in one group.

Shutdown follows the Temporal SDK's worker: **notify** (no session is admitted any more, each
running one is asked to stop at its turn boundary — the call in flight is answered and recorded
first — and verification starts no new call), **drain** (wait until no session holds a slot and no
verifier call is in flight), **grace** (at most that long, on the engine's clock), **cancel** (the
task driving the run is cancelled, as an interrupt would). Every session is left resumable from its
log. :meth:`RunCoordinator.shutdown` is safe to call twice, and from several tasks at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from agent_fleet.aggregate import AggregateStats, Aggregator
from agent_fleet.aggregate.aggregator import DecisionKind
from agent_fleet.aggregate.live import LiveDedup, snapshot_key
from agent_fleet.changes.run_listing import listing
from agent_fleet.clock import timeout
from agent_fleet.dispatch.runner import Dispatcher, DispatchStats
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import Event, EventType, SessionRecord
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.payloads import Alarm, ResultRecorded
from agent_fleet.domain.plan import InputKind, Partition, Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.engine.changes import ChangeKeeper, load_base
from agent_fleet.engine.checks import RunChecks, open_checks
from agent_fleet.engine.door import RunDoor
from agent_fleet.engine.records import create_sessions
from agent_fleet.engine.report import ReportReading, run_status
from agent_fleet.engine.run_ticker import RunTicker
from agent_fleet.engine.verification import RunVerification, VerificationOutcome
from agent_fleet.errors import ProviderDown, ProviderError, cause_of
from agent_fleet.options import RunOptions, RunReport
from agent_fleet.supervise import ShapeWatch, record_shape_alarms

if TYPE_CHECKING:
    from agent_fleet.engine.core import Engine

__all__ = ["DEFAULT_GRACE_S", "RunCoordinator"]

DEFAULT_GRACE_S = 10.0  # how long a shutdown lets the sessions in flight reach their turn boundary

_REPORTED = ("completed", "partial")  # the statuses whose results are verified
_AHEAD_FROM = 0.5  # share of the sessions ended from which verification may judge ahead
_PREPARE_AT = (0.9,)  # shares of the sessions ended at which the final pass is run ahead


class RunCoordinator:
    """One run of an :class:`~agent_fleet.engine.core.Engine` (module docstring). ``fresh``: the run
    was just recorded by this engine (its sessions' logs hold only their creation). ``aggregator``:
    what an earlier dispatch of the run in this engine has clustered so far."""

    def __init__(
        self,
        engine: Engine,
        run_id: str,
        plan: Plan,
        options: RunOptions,
        *,
        fresh: bool = False,
        aggregator: Aggregator | None = None,
        grace: float = DEFAULT_GRACE_S,
    ) -> None:
        self.engine = engine
        self.run_id = run_id
        self.plan = plan
        self.options = options
        self.grace = grace
        self.aggregator = aggregator
        self.dispatcher: Dispatcher | None = None
        self.door: RunDoor | None = None
        self.live: LiveDedup | None = None
        self.verification: RunVerification | None = None
        self.checks: RunChecks | None = None  # with --check: each change checked as it arrives
        self.keeper: ChangeKeeper | None = None  # the run keeps its sessions' changes (a git input)
        self._fresh = fresh
        self._ended_before = 0  # sessions that had ended before this dispatch
        self._sessions_over = False
        self._all_offered = False  # every recorded result went through the aggregator
        self._notified = False
        self._task: asyncio.Task[object] | None = None
        self._ended = asyncio.Event()  # no task drives the run
        self._ended.set()
        self._stopping = asyncio.Lock()

    # -- driving ----------------------------------------------------------------------------------
    async def run(self) -> RunReport:
        """Dispatch every session that has not ended, verify while the last ones run, report."""
        async with self._driving():
            if RunVerification.wanted(self.engine.config):
                self.verification = await self._verification()
            report = await self._drive(report=True)
            assert report is not None
            return report

    async def dispatch(self) -> DispatchStats:
        """Run every session that has not ended; apply budget raises while it runs."""
        async with self._driving():
            await self._drive(report=False)
        assert self.dispatcher is not None
        return self.dispatcher.stats

    async def report(self) -> RunReport:
        """After :meth:`dispatch` (or alone, for a run dispatched elsewhere): the final pass, the
        verification and the report."""
        async with self._driving():
            self._sessions_over = True
            if self.verification is None and RunVerification.wanted(self.engine.config):
                self.verification = await self._verification()
            async with asyncio.TaskGroup() as tg:
                await self._start_checks(tg)
                try:
                    return await self._report()
                finally:
                    self._stop_checks()

    @contextlib.asynccontextmanager
    async def _driving(self) -> AsyncIterator[None]:
        if not self._ended.is_set():
            raise RuntimeError(f"run {self.run_id} is already being driven")
        self._task = asyncio.current_task()
        self._ended.clear()
        try:
            yield
        finally:
            self._task = None
            self._ended.set()

    async def _drive(self, *, report: bool) -> RunReport | None:
        todo, by_sid, ticker = await self._prepare()
        try:
            async with asyncio.TaskGroup() as tg:
                await self._start_checks(tg)
                try:
                    if report:
                        tg.create_task(self._prepare_final())
                        if self.verification is not None:
                            tg.create_task(self.verification.run())
                    await self._sessions(tg, ticker, todo, by_sid)
                    await self._settle(ticker)
                    ticker.live = None  # the final pass takes the aggregator over (and lets it go)
                    return await self._report() if report else None
                finally:
                    self._stop_checks()
        except BaseExceptionGroup as group:
            down = cause_of(group)
            if isinstance(down, ProviderError) and down.exit_code == 4:  # refused credentials, from a session
                down = self.engine.gateway.provider_down() or ProviderDown(str(down))
            if isinstance(down, ProviderDown):
                await self._settle(ticker)  # the figures so far, for status and metrics
                await self.engine.store_metrics(self.run_id)
                raise down from None
            leaves = group.exceptions
            if len(leaves) == 1 and not isinstance(leaves[0], BaseExceptionGroup):
                raise leaves[0] from None  # one error stopped the run: it is the run's error
            raise

    async def _prepare(self) -> tuple[list[tuple[str, Partition]], dict[str, Partition], RunTicker]:
        """The sessions left to run, the door and the dispatcher, the ticker, the live dedup."""
        e, run_id, plan, options = self.engine, self.run_id, self.plan, self.options
        records: dict[str, SessionRecord] = {}
        if not self._fresh:
            records = {r.session_id: r for r in await e.log.list_sessions(run_id)}
            await create_sessions(e.log, e.gateway.router, run_id, plan, options, e.config, existing=records)
        by_sid = {session_id_for(run_id, p.index): p for p in plan.partitions}
        todo = [(sid, p) for sid, p in by_sid.items() if sid not in records or not records[sid].state.terminal]
        self._ended_before = len(by_sid) - len(todo)
        root = plan.input_path if plan.kind is InputKind.DIRECTORY else None
        self.door = RunDoor(e.slots_for(options))
        if self._notified:
            self.door.shut()
        keeper = await self._keeper()
        changes = keeper.spec if keeper is not None else None
        self.dispatcher = e.dispatcher_for(options, self.door, root, sessions=len(todo), changes=changes)
        ticker = RunTicker(e, run_id, self.door.slots)
        ticker.shapes = await self._shape_watch()
        if not self._fresh:  # a fresh run has no raise nor result yet; a raise written meanwhile comes with the ticks
            await ticker.apply_recorded()
        ticker.live = self.live = await self._live_dedup()
        return todo, by_sid, ticker

    async def _sessions(
        self, tg: asyncio.TaskGroup, ticker: RunTicker, todo: list[tuple[str, Partition]], by_sid: dict[str, Partition]
    ) -> None:
        """The sessions, the ticker, admission cycles, the provider watch and the live dedup; returns
        once no session is left to run."""
        dispatcher, door, live = self.dispatcher, self.door, self.live
        assert dispatcher is not None and door is not None and live is not None
        stop = asyncio.Event()
        consumer = tg.create_task(live.consume())
        tg.create_task(door.run(stop))  # admission cycles (LocalSlots: returns at once)
        health = tg.create_task(self._watch_provider())
        keeping = tg.create_task(self.keeper.keep()) if self.keeper is not None else None
        runs = [tg.create_task(dispatcher.run(todo))]

        def resend(again: list[str]) -> None:
            dispatcher.stats.paused -= len(again)
            runs.append(tg.create_task(dispatcher.run([(sid, by_sid[sid]) for sid in again])))

        poll = tg.create_task(ticker.poll_until(resend))
        while True:
            # The ticker may add runs while we wait; no await between the check and the cancel.
            while pending := [t for t in runs if not t.done()]:
                await asyncio.wait(pending)
            poll.cancel()
            # a raise that came in just as the last session paused still counts
            if not await ticker.tick(resend):
                break
            poll = tg.create_task(ticker.poll_until(resend))
        self._sessions_over = True
        health.cancel()
        if keeping is not None:
            keeping.cancel()  # the report writes every branch again, from the log
        stop.set()
        live.finish()
        await consumer

    async def _start_checks(self, tg: asyncio.TaskGroup) -> None:
        """With ``--check``: the run's checks, read back from its log, checking each change as its
        session records it (the engine's tap), in ``tg`` until :meth:`_stop_checks`."""
        e = self.engine
        slots = self.door.slots if self.door is not None else None
        keeper = await self._keeper()
        checks = await open_checks(
            run_id=self.run_id,
            base=keeper.base if keeper is not None else None,
            options=self.options,
            config=e.config,
            workforce=e.workforce,
            log=e.log,
            clock=e.clock,
            slots=slots,
            listen=e.listen,
        )
        self.checks = checks
        if checks is None:
            return
        if self._notified:
            checks.close()
        tg.create_task(checks.run())

    def _stop_checks(self) -> None:
        if self.checks is not None:
            self.engine.unlisten(self.checks.heard)
            self.checks.close()

    async def _prepare_final(self) -> None:
        """While the last sessions run, the final pass over the results so far (once 90 % of the
        sessions ended): after the last session it then redoes only the scopes whose results changed
        since."""
        for share in _PREPARE_AT:
            while not self._sessions_over and self._progress() < share:
                await self.engine.clock.sleep(0.25)
            if self._sessions_over or self.aggregator is None:
                return
            await self.aggregator.prepare_final()

    async def _settle(self, ticker: RunTicker) -> None:
        """The dispatch is over: its figures stored, its routing decisions recorded."""
        if ticker.shapes is not None:
            self.engine.unlisten(ticker.shapes.heard)
            ticker.shapes = None
        await ticker.store_snapshot()
        await self.engine.flush_routes()

    async def _watch_provider(self) -> None:
        """Stop the run (raise ProviderDown) once the gateway says its provider cannot serve it."""
        gateway, clock = self.engine.gateway, self.engine.clock
        while (down := gateway.provider_down()) is None:
            await clock.sleep(0.2)
        raise down

    async def _shape_watch(self) -> ShapeWatch | None:
        """With fleet.yaml ``supervision.shape.pause``: the run's live shape tallies (seeded from the
        log on resume), which the ticker asks for sessions to pause."""
        e = self.engine
        policy = e.config.supervision.shape
        if not policy.pause:
            return None
        watch = ShapeWatch(self.run_id, policy)
        if not self._fresh:
            watch.heard(await e.log.events_of_run(self.run_id, _SHAPE_WATCH_TYPES))
            alarms = [decode_as(ev, Alarm) for ev in await e.log.get_events(self.run_id)]
            watch.recorded([f"{a.kind}:{a.subject}" for a in alarms if a is not None])
        e.listen(watch.heard)
        return watch

    async def _live_dedup(self) -> LiveDedup:
        """Results clustered as they are recorded (on resume, first those recorded so far); the
        ones that open a cluster of their own are offered to the verification."""
        e = self.engine
        if self.aggregator is None:
            self.aggregator = e.aggregator_for(self.run_id, self.options, self.plan)
        live = LiveDedup(self.aggregator, clock=e.clock, on_unique=self._offer)
        if not self._fresh:
            recorded = await e.log.events_of_run(self.run_id, [EventType.RESULT_ITEM])
            live.feed([r.item() for r in (decode_as(ev, ResultRecorded) for ev in recorded) if r is not None])
        return live

    def heard(self, events: Sequence[Event]) -> None:
        """Durable events of the run's sessions (the engine's tap): results go to the live dedup,
        changes to the keeper of the run's branches."""
        if self.live is not None:
            self.live.heard(events)
        if self.keeper is not None:
            self.keeper.heard(events)

    async def _keeper(self) -> ChangeKeeper | None:
        """The run's change keeper, when its plan recorded a base (its input is in a repository)."""
        if self.keeper is None:
            base = await load_base(self.engine.log, self.run_id)
            if base is not None:
                self.keeper = ChangeKeeper(self.engine, self.run_id, self.plan, self.options, base)
        return self.keeper

    def _offer(self, results: list[ResultItem]) -> None:
        if self.verification is not None and results:
            self.verification.offer(results)

    # -- verification -----------------------------------------------------------------------------
    async def _verification(self) -> RunVerification:
        e = self.engine
        earlier = [] if self._fresh else await e.log.get_events(self.run_id)
        v = RunVerification(
            gateway=e.gateway,
            log=e.log,
            run_id=self.run_id,
            plan=self.plan,
            config=e.config,
            run_model=self.options.model,
            clock=e.clock,
            run_events=earlier,
            options=self.options,
        )
        v.demand = self._demand
        v.progress = self._progress
        v.pending = self._pending
        v.ahead = self._ahead
        if self._notified:
            v.close()
        return v

    def _demand(self) -> int:
        """Slots the run's sessions may still ask for: one per session admitted or waiting."""
        stats = self.dispatcher.stats if self.dispatcher is not None else None
        return 0 if self._sessions_over or stats is None else stats.active + stats.queued

    def _progress(self) -> float:
        """The share of the run's sessions that ended (paused ones included: they add no result)."""
        stats = self.dispatcher.stats if self.dispatcher is not None else None
        if self._sessions_over or stats is None or not self.plan.partitions:
            return 1.0
        ended = self._ended_before + stats.completed + stats.failed + stats.paused
        return ended / len(self.plan.partitions)

    def _ahead(self) -> bool:
        """Verification may start ahead of the final results once half the sessions ended (the sample's
        size is projected from them), while no session is paused (a run that ends paused reports no
        verification, and budgets are short there) and until the last session ended: from then on
        the results not clustered live go to the final pass without being offered, so a projection
        from those offered would fall short, and the sample itself is only a final pass away."""
        stats = self.dispatcher.stats if self.dispatcher is not None else None
        if self._sessions_over:
            return False
        return self._progress() >= _AHEAD_FROM and (stats is None or stats.paused == 0)

    def _pending(self) -> int:
        """Results heard and not clustered yet (the final pass offers them)."""
        return 0 if self._all_offered or self.live is None else self.live.unclustered

    # -- the report -------------------------------------------------------------------------------
    async def _report(self) -> RunReport:
        """The final pass over every recorded result, the verification's sample, the report."""
        e, run_id = self.engine, self.run_id
        if self.checks is not None:  # every change's check is recorded before the report reads the log
            await self.checks.drain()
        sessions = await e.log.list_sessions(run_id)
        status = run_status(sessions)
        verification = self.verification
        if verification is not None and status not in _REPORTED:
            await verification.abandon()
            verification = None
        async with asyncio.TaskGroup() as tg:  # the results are read back while the final pass runs
            reading = tg.create_task(e.log.events_of_run(run_id, [EventType.RESULT_ITEM]))
            unique, agg, recorded = await self._deduplicate(reading)
        results = ReportReading(e.config.supervision.confidence_threshold)
        results.heard_results(reading.result())
        del reading  # the result events: what the report needs of them is in ``results``
        if verification is not None and not unique:
            await verification.abandon()
            verification = None
        keeper = await self._keeper()
        changes: dict[str, Any] = listing(run_id, None, [], None)
        patches: dict[str, bytes] = {}
        if keeper is not None:
            changes, patches = await keeper.integrate()
        verified: VerificationOutcome | None = None
        if verification is not None:
            verified = await verification.finish(unique, recorded)
            unique = verified.results
        del recorded  # the results as recorded: the report is written from ``unique``
        # read once the dedup state is let go: the sessions' shapes are a large part of the log
        await record_shape_alarms(e.log, run_id, e.config.supervision.shape)
        return await e.write_report(
            run_id,
            self.options,
            self.plan,
            status=status,
            sessions=sessions,
            reading=results,
            unique=unique,
            agg=agg,
            verification=verified.summary if verified is not None else None,
            changes=changes,
            patches=patches,
        )

    async def _deduplicate(
        self, reading: asyncio.Task[list[Event]]
    ) -> tuple[list[ResultItem], AggregateStats, Callable[[str], ResultItem | None]]:
        """The final pass over what live deduplication built (if the run dispatched here), while the
        log is ``reading``; then the recorded results it had not seen, if any, and the pass again.
        Returns the unique results, the dedup figures (stored as the run's dedup snapshot) and each
        result as it was recorded."""
        e = self.engine
        aggregator = self.aggregator or e.aggregator_for(self.run_id, self.options, self.plan)
        self.aggregator = None  # the run's aggregator is spent: its cache closes below
        try:
            if self.live is not None:
                await self.live.drain()
            # The sessions are over: the live dedup, and through it the aggregator, can go once the
            # final pass is done, before the report is built (their results are in ``unique``).
            self.live = None
            self._all_offered = True
            unique = await aggregator.finalize() if len(aggregator) else []
            found = [decode_as(ev, ResultRecorded) for ev in await reading]
            recorded = {r.id: r for r in found if r is not None}
            unseen = [r.item() for rid, r in recorded.items() if rid not in aggregator]
            if unseen or not len(aggregator):
                decisions = await aggregator.add_many(unseen)
                self._offer([r for r, d in zip(unseen, decisions, strict=True) if d.kind is DecisionKind.NEW])
                unique = await aggregator.finalize()
            agg = aggregator.stats()
            await e.log.put_snapshot(snapshot_key(self.run_id), agg.to_dict())
            await e.record_embeddings(self.run_id)
        finally:
            if aggregator.cache is not None:
                aggregator.cache.close()

        def as_recorded(result_id: str) -> ResultItem | None:
            found = recorded.get(result_id)
            return None if found is None else found.item()

        return unique, agg, as_recorded

    # -- shutdown ---------------------------------------------------------------------------------
    def notify(self) -> None:
        """Admit no session any more, ask each running one to stop at its turn boundary, start no
        verifier call. Safe to call twice."""
        self._notified = True
        door, dispatcher = self.door, self.dispatcher
        if door is not None and not door.is_shut:
            door.shut()
            if dispatcher is not None:
                for sid in door.holders():
                    dispatcher.preempt(sid, "shutdown")
        if self.verification is not None:
            self.verification.close()
        if self.checks is not None:
            self.checks.close()

    async def shutdown(self, grace: float | None = None) -> None:
        """Notify → drain → grace → cancel (module docstring); returns once no task drives the run.
        ``grace``: seconds of the engine's clock the drain may take (default: the coordinator's)."""
        self.notify()
        async with self._stopping:
            task = self._task
            if task is None or task is asyncio.current_task() or self._ended.is_set():
                return
            with contextlib.suppress(TimeoutError):
                async with timeout(self.engine.clock, self.grace if grace is None else grace):
                    await self._drained()
            if not self._ended.is_set():
                task.cancel()
            await self._ended.wait()

    async def _drained(self) -> None:
        """Until no session holds a slot and no verifier call is in flight. Once the door is shut and
        verification closed neither starts again, and a run that ended holds neither."""
        if self.door is not None:
            await self.door.idle.wait()
        if self.verification is not None:
            await self.verification.idle.wait()

    def __repr__(self) -> str:
        state = "stopping" if self._notified else ("idle" if self._ended.is_set() else "running")
        return f"RunCoordinator({self.run_id}, {state}, dispatcher={self.dispatcher!r})"


_SHAPE_WATCH_TYPES = (
    EventType.SESSION_CREATED,
    EventType.MODEL_RESPONSE,
    EventType.TOOL_CALL,
    EventType.SESSION_STARTED,
    EventType.SESSION_RESUMED,
    EventType.SESSION_PAUSED,
    EventType.SESSION_COMPLETED,
    EventType.SESSION_FAILED,
)
