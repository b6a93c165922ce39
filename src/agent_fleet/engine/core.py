"""The engine of one process: a store, a gateway, and a coordinator per run it drives.

:class:`Engine` records a run (its plan and sessions) and drives it through one
:class:`~agent_fleet.engine.run.RunCoordinator`, which owns the run's TaskGroup (sessions, ticker,
live deduplication, verification) and its shutdown. ``shutdown()`` stops every run it drives
(notify → drain → grace → cancel), then closes its parts in reverse order of building; it is safe
to call twice. Building one is :mod:`agent_fleet.engine.compose`'s job; the one ``FleetConfig``
it is given serves every plane and every run.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from agent_fleet.admission import AdmissionController, KueueObjects
from agent_fleet.aggregate import (
    AggregateConfig,
    AggregateStats,
    Aggregator,
    ItemIndex,
    choose_embedder,
    resolve_scope,
    write_outputs,
)
from agent_fleet.brain.harness import Harness
from agent_fleet.changes.run_listing import html as changes_html
from agent_fleet.changes.run_listing import listing, summary_block
from agent_fleet.changes.run_listing import markdown as changes_markdown
from agent_fleet.clock import Clock, RealClock
from agent_fleet.config import FleetConfig
from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions, DispatchStats
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.dispatch.starts import resident_places
from agent_fleet.domain.accounts import AccountScope, queue_account
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType, SessionRecord
from agent_fleet.domain.ids import new_run_id
from agent_fleet.domain.payloads import Check
from agent_fleet.domain.plan import InputKind, Partition, Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.engine.changes import record_base
from agent_fleet.engine.embeddings import MeteredEmbeddings
from agent_fleet.engine.limits import session_limits
from agent_fleet.engine.planning import plan_event_data
from agent_fleet.engine.preflight import admission_objects, session_slots
from agent_fleet.engine.records import create_sessions, load_run, owner
from agent_fleet.engine.report import (
    CALL_TYPES,
    SESSION_TYPES,
    ReportReading,
    dispatch_sessions,
    fleet_snapshot,
    metered_models,
    recorded_models,
    run_summary,
    timeline,
)
from agent_fleet.engine.run import DEFAULT_GRACE_S, RunCoordinator
from agent_fleet.engine.workforce import Workforce
from agent_fleet.hands.files import PartitionFiles
from agent_fleet.hands.port import Hands, ToolOutput, WorkspaceChanges
from agent_fleet.observe.metrics import FleetSnapshot, check_figures, metrics_key, render
from agent_fleet.observe.summary import FIGURE_EVENTS
from agent_fleet.options import RunOptions, RunReport, session_tokens
from agent_fleet.session.lease import LeaseKeeper, LeaseStore
from agent_fleet.session.port import SessionLog
from agent_fleet.session.tap import TappedLog
from agent_fleet.spend.gateway import Gateway
from agent_fleet.supervise import ShapeWatch, audit_markdown, decision_audit, review_queue, store_model_signals

__all__ = ["Engine"]

_logger = logging.getLogger(__name__)


class _NoHands:
    def specs(self) -> tuple[()]:
        return ()

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        return ToolOutput(f"error: unknown tool {name!r}", is_error=True)

    async def aclose(self) -> None:
        return None


class Engine:
    """One process's engine: a store, a gateway, and a coordinator per run it drives (``serve``
    drives several runs at once over the one gateway, pool and log).

    ``config`` is the fleet.yaml the engine was opened with (default: fleet.yaml's defaults).
    ``queues``: the Kueue objects of its ``queues:``, read when the engine was built. ``parts``:
    what closes the engine's parts (the composition root fills it as it builds them); without it
    ``shutdown()`` closes the workforce, the gateway, the lease and the log it was given.
    """

    def __init__(
        self,
        *,
        log: SessionLog,
        gateway: Gateway,
        config: FleetConfig | None = None,
        clock: Clock | None = None,
        slots_for: Callable[[RunOptions], SessionSlots] | None = None,
        workforce: Workforce | None = None,
        lease: LeaseKeeper | None = None,
        queues: KueueObjects | None = None,
        parts: AsyncExitStack | None = None,
        store: LeaseStore | None = None,
    ) -> None:
        self.log: SessionLog = TappedLog(log, self._heard)
        self.store = store  # the store under the log, where runs' leases are taken (serve: one per run)
        self.config = config or FleetConfig()
        self.lease = lease  # the run's lease (one owner per run); given back by shutdown()
        self.queues = queues
        self._listeners: list[Callable[[Sequence[Event]], None]] = []  # listen(): telemetry and the like
        self._runs: dict[str, RunCoordinator] = {}  # run id → its coordinator, until its report is built
        self._stats: dict[str, DispatchStats] = {}  # run id → the figures of its last dispatch here
        # runs create_run recorded here and no dispatch has started yet: each session's log holds
        # only its creation, so the first dispatch need not read the run back
        self._just_created: set[str] = set()
        self._admission_metrics: dict[str, bytes] = {}  # run id → Kueue's metrics at the last tick
        self._admission_source: dict[str, str] = {}  # run id → the controller they are of
        self._embeddings = MeteredEmbeddings(gateway)  # provider embeddings, recorded in the run's log
        self.gateway = gateway
        self.gateway_source = uuid.uuid4().hex  # names this engine's one gateway in stored metrics
        self.clock = clock or RealClock()
        self.workforce = workforce  # worker pool, hands, CLI agents; closed by shutdown()
        self._slots_for = slots_for or self.default_slots
        self._last_run: str | None = None
        self._parts = parts if parts is not None else self._own_parts(log)
        self._closed = False
        # The gateway decides fallbacks inside a call; its decisions are recorded on the next tick.
        self._routes: list[tuple[str, dict[str, str]]] = []
        gateway.on_route = lambda sid, route: self._routes.append((sid, route))

    def _own_parts(self, log: SessionLog) -> AsyncExitStack:
        """Closing what the engine was given, in reverse: the workforce, the gateway, the lease, the log.
        The lease goes back before the log closes (its epoch is kept: the writes still queued land)."""
        parts = AsyncExitStack()
        parts.push_async_callback(log.close)
        if self.lease is not None:
            parts.push_async_callback(self.lease.release)
        close = getattr(self.gateway, "aclose", None)
        if close is not None:
            parts.push_async_callback(close)
        if self.workforce is not None:
            parts.push_async_callback(close_workforce, self.workforce)
        return parts

    def listen(self, listener: Callable[[Sequence[Event]], None]) -> None:
        """Call ``listener`` with every batch of events once it is durable (it must not block)."""
        self._listeners.append(listener)

    def unlisten(self, listener: Callable[[Sequence[Event]], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _heard(self, events: Sequence[Event]) -> None:
        """Every durable append: result items go to their run's coordinator (live deduplication)."""
        if self._runs and any(e.type in _COORDINATED for e in events):
            run = self._runs.get(events[0].session_id.rsplit(".", 1)[0])  # RUN.sNNNNN → RUN
            if run is not None:
                run.heard(events)
        for listener in self._listeners:
            listener(events)

    # -- the parts a run is built from -----------------------------------------------------------
    def aggregator_for(self, run_id: str, options: RunOptions, plan: Plan | None = None) -> Aggregator:
        """The run's aggregator: its embedder, its scope and threshold (``deploy``'s flags, else
        fleet.yaml's ``aggregate``, else the defaults) and the plan's input items, which tell what each
        result is about (aggregate/merge_scope.py)."""
        out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
        embed_session = f"{run_id}.embed"
        if options.embedder == "provider":
            # Embedding spend grows with the run: one session budget per partition's worth of results.
            per_session = session_tokens(options)
            self.gateway.set_session_budget(embed_session, tokens=per_session * max(1, options.agents))
        embedder = choose_embedder(
            options.embedder, gateway=self._embeddings, model=options.embedding_model, session_id=embed_session
        )
        settings = self.config.aggregate
        scope, source = resolve_scope(options.dedup_scope, settings.dedup_scope)
        threshold, threshold_source = options.dedup_threshold, "--dedup-threshold"
        if threshold is None and settings.dedup_threshold is not None:
            threshold, threshold_source = settings.dedup_threshold, "aggregate.dedup_threshold in fleet.yaml"
        config = AggregateConfig(
            scope=scope,
            scope_reason=source,
            items=ItemIndex.from_plan(plan),
            threshold=threshold,
            threshold_source=threshold_source if threshold is not None else "default",
        )
        return Aggregator.for_run(out_dir, embedder, config=config)

    def assign(self, run_id: str, options: RunOptions) -> None:
        """Charge every call of the run to its LocalQueue's account and, on ``serve``, its team's
        (:mod:`agent_fleet.spend.groups`); before its first call (the planner's, when it has one)."""
        team = options.team if options.team in self.config.teams else None
        self.gateway.assign_run(run_id, queue=queue_account(options.queue), team=team)

    def slots_for(self, options: RunOptions) -> SessionSlots:
        return self._slots_for(options)

    def default_slots(self, options: RunOptions) -> SessionSlots:
        """Admission per fleet.yaml ``queues:``; without it one ClusterQueue that holds the run's
        concurrency (its number of agents) of sessions. Each session requests what
        :func:`~agent_fleet.engine.preflight.session_requests` says."""
        controller = AdmissionController(self.queues or admission_objects(options, self.config), self.clock)
        return session_slots(controller, options, self.config)

    def dispatcher_for(
        self,
        options: RunOptions,
        slots: SessionSlots,
        root: str | None,
        *,
        sessions: int,
        changes: WorkspaceChanges | None = None,
    ) -> Dispatcher:
        """A run's dispatcher over this engine's log and gateway, with the workforce's parts;
        ``changes``: the run keeps its sessions' changes (their sandboxes are worktrees of its base)."""
        base = DispatchOptions(
            session_timeout=options.timeout,
            start_ahead=max(16, 2 * options.max_concurrency),  # enough to fill every gateway slot twice
            resident=resident_places(options.max_concurrency),
            max_attempts=options.max_attempts,
            limits=session_limits(options, self.config),
        )
        wf = self.workforce
        parts = (
            wf.dispatch_parts(base, sessions=sessions, root=root, changes=changes)
            if wf is not None
            else {"options": base}
        )
        return Dispatcher(
            log=self.log,
            gateway=self.gateway,
            brain=Harness,
            hands_for=lambda p: self.hands_for(p, root, changes),
            slots=slots,
            clock=self.clock,
            **parts,
        )

    def hands_for(self, partition: Partition, root: str | None, changes: WorkspaceChanges | None = None) -> Hands:
        if self.workforce is not None:
            return self.workforce.hands_for(partition, root, changes)
        if partition.kind is InputKind.DIRECTORY and root is not None:
            return PartitionFiles(root, partition.items)
        return _NoHands()

    # -- figures ----------------------------------------------------------------------------------
    def metrics(self, run_id: str) -> FleetSnapshot:
        """The live figures behind ``fleet_*`` metrics."""
        run = self._runs.get(run_id)
        aggregator = run.aggregator if run is not None else None
        checks = run.checks if run is not None else None
        return fleet_snapshot(
            run_id,
            models=metered_models(self.gateway.meter.run_models.get(run_id, {})),
            sessions=dispatch_sessions(self.stats(run_id)),
            dedup=aggregator.stats() if aggregator is not None else None,
            concurrency_limit=self.gateway.limiter.total,
            in_flight=self.gateway.statistics().in_flight,
            checks=checks.figures() if checks is not None else None,
        )

    async def store_metrics(self, run_id: str, admission: bytes | None = None, *, source: str | None = None) -> bytes:
        """Store the Prometheus text of the run (``agent-fleet metrics`` reads it) and return it.
        ``admission``: Kueue's families (default: the last stored); ``source`` names the admission
        controller they are of."""
        if admission is not None:
            self._admission_metrics[run_id] = admission
        if source is not None:
            self._admission_source[run_id] = source
        return await self._put_metrics(run_id, self.metrics(run_id))

    async def _put_metrics(self, run_id: str, snapshot: FleetSnapshot) -> bytes:
        text = render(snapshot, admission=self._admission_metrics.get(run_id, b""))
        stored = {
            "text": text.decode(),
            "admission_source": self._admission_source.get(run_id, ""),
            "gateway_source": self.gateway_source,  # runs of one gateway share its one concurrency limit
        }
        await self.log.put_snapshot(metrics_key(run_id), stored)
        return text

    async def record_embeddings(self, run_id: str) -> None:
        """Provider embeddings spent since the last record go into the run's log (summary == log)."""
        spent = self._embeddings.take()
        if spent is not None:
            await self.log.emit_event(run_id, EventType.EMBEDDINGS, spent)

    async def flush_routes(self) -> None:
        """Record the gateway's routing decisions as ``route`` events of their sessions."""
        pending, self._routes = self._routes, []
        for sid, route in pending:
            await self.log.emit_event(sid, EventType.ROUTE, route)

    async def pause_outliers(self, run_id: str, watch: ShapeWatch) -> None:
        """Pause every running session the watch names, through its budget: its token cap becomes what it
        has spent, so its next call is refused and it pauses (never killed); ``budget raise`` lets it go on."""
        alarms = watch.due()
        for a in alarms:
            sid = a.session_id or ""
            spent = self.gateway.book.account(AccountScope.SESSION, sid).spent_tokens
            self.gateway.set_session_budget(sid, tokens=max(1, spent))
        if alarms:
            await self.log.emit_events(run_id, [(EventType.ALARM, {**a.to_event(), "paused": True}) for a in alarms])

    def stats(self, run_id: str | None = None) -> DispatchStats | None:
        """A run's dispatch figures (default: the run dispatched last); None before its dispatch."""
        run_id = run_id or self._last_run or ""
        run = self._runs.get(run_id)
        if run is not None and run.dispatcher is not None:
            return run.dispatcher.stats
        return self._stats.get(run_id)

    # -- phase 1: record the plan -----------------------------------------------------------------
    async def create_run(
        self,
        plan: Plan,
        options: RunOptions,
        *,
        run_id: str | None = None,
        forecast: dict[str, Any] | None = None,
        planner: dict[str, Any] | None = None,
        via: str | None = None,
    ) -> str:
        """Record the run and its plan in one append (``planner``: the call that planned it, if one did;
        ``via``: what recorded it, when not the command line — ``serve`` resumes only its own); a run
        recorded before its planner's call (:meth:`record_run`) gets its plan, and forecast, alone."""
        plan.check()
        run_id = run_id or new_run_id()
        base = await record_base(plan)
        planned = plan_event_data(plan, planner)
        if base is not None:  # the run keeps its sessions' changes: every worktree starts here
            planned["base"] = base.to_dict()
        if await self.log.get_session(run_id) is not None:  # recorded before planning
            await self.log.emit_events(run_id, [(EventType.PLAN, {**planned, "forecast": forecast})])
        else:
            created = {**self._created(options, via), "forecast": forecast}
            await self.log.emit_events(run_id, [(EventType.RUN_CREATED, created), (EventType.PLAN, planned)])
        await create_sessions(self.log, self.gateway.router, run_id, plan, options, self.config)
        self._just_created.add(run_id)
        return run_id

    async def record_run(self, options: RunOptions, *, run_id: str, via: str | None = None) -> str:
        """Record a run whose plan a model call is about to make (``planning: true``): the call then
        belongs to a run that ``status`` lists and ``resume`` continues."""
        created = {**self._created(options, via), "planning": True}
        await self.log.emit_events(run_id, [(EventType.RUN_CREATED, created)])
        return run_id

    @staticmethod
    def _created(options: RunOptions, via: str | None) -> dict[str, Any]:
        created = {"task": options.task, "input": options.input_path, "options": options.to_dict(), "owner": owner()}
        if via is not None:
            created["via"] = via
        return created

    # -- phases 2 and 3: one coordinator per run ---------------------------------------------------
    def coordinator(self, run_id: str, plan: Plan, options: RunOptions) -> RunCoordinator:
        """A new coordinator for the run; it carries over what an earlier dispatch of the run in this
        engine has clustered."""
        self.assign(run_id, options)
        earlier = self._runs.get(run_id)
        fresh = run_id in self._just_created
        self._just_created.discard(run_id)
        carried = earlier.aggregator if earlier is not None else None
        run = self._runs[run_id] = RunCoordinator(self, run_id, plan, options, fresh=fresh, aggregator=carried)
        self._last_run = run_id
        return run

    async def run(self, run_id: str, plan: Plan, options: RunOptions) -> RunReport:
        """Dispatch every session that has not ended and aggregate, the aggregation overlapping the
        run's last sessions (live deduplication, verification started early)."""
        run = self.coordinator(run_id, plan, options)
        try:
            return await run.run()
        finally:
            self._retire(run)

    async def dispatch(self, run_id: str, plan: Plan, options: RunOptions) -> DispatchStats:
        """Run every session that has not ended; apply budget raises while it runs."""
        run = self.coordinator(run_id, plan, options)
        try:
            return await run.dispatch()
        finally:
            if run.dispatcher is not None:
                self._stats[run_id] = run.dispatcher.stats

    async def aggregate(self, run_id: str, options: RunOptions, plan: Plan | None = None) -> RunReport:
        """Phase 3 alone: the final pass over every recorded result, verification, the report."""
        run = self._runs.get(run_id)  # dispatched here: what it built carries over
        if run is None:
            if plan is None:
                _, plan = await load_run(self.log, run_id)
            run = self._runs[run_id] = RunCoordinator(self, run_id, plan, options)
        try:
            return await run.report()
        finally:
            self._retire(run)

    def _retire(self, run: RunCoordinator) -> None:
        if run.dispatcher is not None:
            self._stats[run.run_id] = run.dispatcher.stats
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]
        if run.aggregator is not None and run.aggregator.cache is not None:
            run.aggregator.cache.close()

    async def write_report(
        self,
        run_id: str,
        options: RunOptions,
        plan: Plan,
        *,
        status: str,
        sessions: list[SessionRecord],
        reading: ReportReading,
        unique: list[ResultItem],
        agg: AggregateStats,
        verification: dict[str, Any] | None,
        changes: dict[str, Any] | None = None,
        patches: Mapping[str, bytes] | None = None,
    ) -> RunReport:
        """The run's outputs from the state built while it ran: summary.json, results.jsonl, report.md,
        metrics.prom; its model signals and final metrics snapshot; its end event. ``changes``: the
        run's changes listing (``agent-fleet changes``), ``patches`` their patches by session.
        ``reading``: what the report keeps of the run's results; the rest of the log is read one
        group of event types at a time, each let go once folded, so the outputs are written without
        the run's whole log in memory."""
        out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
        review_config = self.config.supervision
        run_events = await self.log.get_events(run_id)
        figures = reading.ledger
        for ev in run_events:
            figures.fold_run(ev)
        figures.count_sessions(sessions)
        calls = await self.log.events_of_run(run_id, CALL_TYPES)
        for ev in calls:
            if ev.type in _FIGURE_TYPES:
                figures.fold(ev)
        signalled = [ev for ev in calls if ev.type in _SIGNAL_TYPES]
        calls.clear()
        await store_model_signals(self.log, run_id, signalled, run_events, now=time.time())
        del signalled  # the model calls and tool calls: folded into the figures and the model signals
        course = await self.log.events_of_run(run_id, SESSION_TYPES)
        run_rec = await self.log.get_session(run_id)
        created_at = run_rec.created_at if run_rec else time.time()
        review = review_queue(run_id, run_events, [*reading.flagged, *course], review_config)
        audit = decision_audit(run_events, course, review)
        summary = run_summary(
            run_id=run_id,
            status=status,
            options=options,
            plan=plan,
            partitions=len(sessions),
            figures=figures,
            results_unique=len(unique),
            agg=agg,
            duration_s=round(time.time() - created_at, 3),
            out_dir=out_dir,
            verification=verification,
            review=review,
            audit=audit,
            run_events=run_events,
        )
        view = changes if changes is not None else listing(run_id, None, [], None)
        summary["changes"] = summary_block(view)
        sessions_by_state = {str(k): v for k, v in figures.sessions.items()}
        checked = [dict(p.record) for p in map(decode, course) if isinstance(p, Check)]
        final = fleet_snapshot(
            run_id,
            models=recorded_models(figures),
            sessions=sessions_by_state,
            dedup=agg,
            concurrency_limit=self.gateway.limiter.total,
            checks=check_figures(checked) if options.check else None,
        )
        metrics_text = await self._put_metrics(run_id, final)
        spans = timeline(course, created_at)
        course.clear()  # read: the outputs below are written from what was built from it
        sections, html_sections = [audit_markdown(audit, review)], []
        if plan.kind is InputKind.DIRECTORY:  # a codebase: what its sessions changed, or why that is not kept
            sections.insert(0, changes_markdown(view, patches or {}))
            html_sections.append(changes_html(view, patches or {}))
        await asyncio.to_thread(
            write_outputs, out_dir, summary, unique, timeline=spans, sections=sections, html_sections=html_sections
        )
        await asyncio.to_thread((out_dir / "metrics.prom").write_bytes, metrics_text)
        end_type = _END_TYPES.get(status, EventType.RUN_FAILED)
        brief = {k: summary[k] for k in ("status", "results_raw", "results_unique", "dedup_rate", "cost_usd")}
        await self.log.emit_event(run_id, end_type, {"summary": brief})
        return RunReport(run_id, summary, tuple(unique), out_dir)

    # -- lifecycle --------------------------------------------------------------------------------
    def coordinators(self) -> list[RunCoordinator]:
        """The coordinators of the runs this engine drives now."""
        return list(self._runs.values())

    async def stop_runs(self, grace: float = DEFAULT_GRACE_S) -> None:
        """Stop every run this engine drives, all at once: notify → drain → ``grace`` seconds → cancel
        (see :class:`~agent_fleet.engine.run.RunCoordinator`). Each is left resumable."""
        runs = self.coordinators()
        if runs:
            await asyncio.gather(*(run.shutdown(grace) for run in runs))
        for run in runs:
            self._retire(run)

    async def shutdown(self, grace: float = DEFAULT_GRACE_S) -> None:
        """Stop every run this engine drives (:meth:`stop_runs`), then close its parts in reverse
        order of building. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.stop_runs(grace)
        finally:
            await self._parts.aclose()


_COORDINATED = frozenset({EventType.RESULT_ITEM, EventType.CHANGE})  # what a run's coordinator hears

_FIGURE_TYPES = frozenset(FIGURE_EVENTS)  # what of CALL_TYPES the run's figures fold
_SIGNAL_TYPES = frozenset(  # what of CALL_TYPES the model signals read
    {
        EventType.SESSION_CREATED,
        EventType.ROUTE,
        EventType.SESSION_STARTED,  # a session's model is counted from its start, as over the whole log
        EventType.MODEL_RESPONSE,
        EventType.TOOL_CALL,
        EventType.TOOL_RESULT,
    }
)

_END_TYPES = {
    "completed": EventType.RUN_COMPLETED,
    "paused": EventType.RUN_PAUSED,
    "interrupted": EventType.RUN_INTERRUPTED,
}


async def close_workforce(workforce: Workforce) -> None:
    """Close the workforce; a failure is logged, so the gateway and the store close all the same."""
    try:
        await workforce.aclose()
    except Exception:
        _logger.exception("closing the workforce failed")
