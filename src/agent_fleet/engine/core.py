"""The engine of one process: a store, a gateway, and a dispatcher per run it drives.

:class:`Engine` records a run (its plan and sessions), dispatches what has not ended in one
TaskGroup, and aggregates the results into the run's report; ``shutdown()`` is notify → drain →
close and is safe to call twice. Building one is :mod:`agent_fleet.engine.compose`'s job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet.admission import AdmissionController
from agent_fleet.admission.slots import AdmissionSlots
from agent_fleet.aggregate import (
    AggregateConfig,
    AggregateStats,
    Aggregator,
    choose_embedder,
    resolve_scope,
    write_outputs,
)
from agent_fleet.aggregate.live import LiveDedup, snapshot_key
from agent_fleet.brain.harness import Harness
from agent_fleet.clock import Clock, RealClock
from agent_fleet.config import load_config
from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions, DispatchStats
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.events import Event, EventType, SessionRecord
from agent_fleet.domain.ids import new_run_id, session_id_for
from agent_fleet.domain.plan import InputKind, Partition, Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.engine.embeddings import MeteredEmbeddings
from agent_fleet.engine.limits import session_limits
from agent_fleet.engine.planning import plan_event_data
from agent_fleet.engine.preflight import admission_objects
from agent_fleet.engine.records import create_sessions, load_run, owner
from agent_fleet.engine.report import final_snapshot, live_snapshot, run_status, run_summary, timeline
from agent_fleet.engine.run_ticker import RunTicker
from agent_fleet.engine.verification import verify_run
from agent_fleet.engine.workforce import Workforce
from agent_fleet.errors import ProviderDown, ProviderError, cause_of
from agent_fleet.hands.files import PartitionFiles
from agent_fleet.hands.port import Hands, ToolOutput
from agent_fleet.observe.metrics import FleetSnapshot, metrics_key, render
from agent_fleet.observe.summary import run_figures
from agent_fleet.options import RunOptions, RunReport, session_tokens
from agent_fleet.session.lease import LeaseKeeper
from agent_fleet.session.port import SessionLog
from agent_fleet.session.tap import TappedLog
from agent_fleet.spend.gateway import Gateway
from agent_fleet.supervise import (
    ShapeWatch,
    audit_markdown,
    decision_audit,
    record_shape_alarms,
    review_queue,
    store_model_signals,
)

__all__ = ["Engine"]

_logger = logging.getLogger(__name__)


class _NoHands:
    def specs(self) -> tuple[()]:
        return ()

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        return ToolOutput(f"error: unknown tool {name!r}", is_error=True)

    async def aclose(self) -> None:
        return None


@dataclass
class _Live:
    dispatcher: Dispatcher | None = None
    started: float = field(default_factory=time.monotonic)


class Engine:
    """One process's engine: a store, a gateway, and a dispatcher per run it drives (``serve``
    drives several runs at once over the one gateway)."""

    def __init__(
        self,
        *,
        log: SessionLog,
        gateway: Gateway,
        clock: Clock | None = None,
        slots_for: Callable[[RunOptions], SessionSlots] | None = None,
        workforce: Workforce | None = None,
        lease: LeaseKeeper | None = None,
    ) -> None:
        self.log: SessionLog = TappedLog(log, self._heard)
        self.lease = lease  # the run's lease (one owner per run); given back by shutdown()
        self._listeners: list[Callable[[Sequence[Event]], None]] = []  # listen(): telemetry and the like
        self._dedup: dict[str, LiveDedup] = {}  # run id → results clustered as they are recorded
        # runs create_run recorded here and no dispatch has started yet: each session's log holds
        # only its creation, so the first dispatch need not read the run back
        self._just_created: set[str] = set()
        self._admission_metrics: dict[str, bytes] = {}  # run id → Kueue's metrics at the last tick
        self._admission_source: dict[str, str] = {}  # run id → the controller they are of
        self._embeddings = MeteredEmbeddings(gateway)  # provider embeddings, recorded in the run's log
        self.gateway = gateway
        self.clock = clock or RealClock()
        self.workforce = workforce  # worker pool, hands, CLI agents; closed by shutdown()
        self._slots_for = slots_for or self.default_slots
        self._live: dict[str, _Live] = {}  # run id → its dispatcher, one per run dispatched
        self._last_run: str | None = None
        self._closed = False
        # The gateway decides fallbacks inside a call; its decisions are recorded on the next tick.
        self._routes: list[tuple[str, dict[str, str]]] = []
        gateway.on_route = lambda sid, route: self._routes.append((sid, route))

    def listen(self, listener: Callable[[Sequence[Event]], None]) -> None:
        """Call ``listener`` with every batch of events once it is durable (it must not block)."""
        self._listeners.append(listener)

    def _heard(self, events: Sequence[Event]) -> None:
        """Every durable append: result items go to their run's live deduplication."""
        if self._dedup and any(e.type == EventType.RESULT_ITEM for e in events):
            live = self._dedup.get(events[0].session_id.rsplit(".", 1)[0])  # RUN.sNNNNN → RUN
            if live is not None:
                live.heard(events)
        for listener in self._listeners:
            listener(events)

    def _aggregator(self, run_id: str, options: RunOptions) -> Aggregator:
        out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
        embed_session = f"{run_id}.embed"
        if options.embedder == "provider":
            # Embedding spend grows with the run: one session budget per partition's worth of results.
            per_session = session_tokens(options)
            self.gateway.set_session_budget(embed_session, tokens=per_session * max(1, options.agents))
        embedder = choose_embedder(
            options.embedder, gateway=self._embeddings, model=options.embedding_model, session_id=embed_session
        )
        setting = load_config(options.config_path).aggregate.dedup_scope
        input_kind = "directory" if options.input_path and Path(options.input_path).is_dir() else None
        scope, why = resolve_scope(setting, options.task, input_kind)
        return Aggregator.for_run(out_dir, embedder, config=AggregateConfig(scope=scope, scope_reason=why))

    def metrics(self, run_id: str) -> FleetSnapshot:
        """The live figures behind ``fleet_*`` metrics."""
        live = self._dedup.get(run_id)
        return live_snapshot(
            run_id,
            models=self.gateway.meter.models,
            stats=self.stats(run_id),
            dedup=live.aggregator.stats() if live is not None else None,
            concurrency_limit=self.gateway.limiter.total,
            in_flight=self.gateway.statistics().in_flight,
        )

    async def store_metrics(self, run_id: str, admission: bytes = b"", *, source: str | None = None) -> bytes:
        """Store the Prometheus text of the run (``agent-fleet metrics`` reads it) and return it.
        ``source`` names the admission controller whose ``kueue_*`` families the text holds."""
        self._admission_metrics[run_id] = admission
        if source is not None:
            self._admission_source[run_id] = source
        text = render(self.metrics(run_id), admission=admission)
        await self.log.put_snapshot(metrics_key(run_id), self._metrics_snapshot(run_id, text))
        return text

    def _metrics_snapshot(self, run_id: str, text: bytes) -> dict[str, str]:
        return {"text": text.decode(), "admission_source": self._admission_source.get(run_id, "")}

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

    def default_slots(self, options: RunOptions) -> SessionSlots:
        """Admission per fleet.yaml ``queues:``; without it one ClusterQueue whose ``pods`` quota is
        the run's concurrency (its number of agents)."""
        controller = AdmissionController(admission_objects(options), self.clock)
        return AdmissionSlots(controller, queue=options.queue or "default", priority_class=options.priority)

    # -- phase 1: record the plan ---------------------------------------------------------------
    async def create_run(
        self,
        plan: Plan,
        options: RunOptions,
        *,
        run_id: str | None = None,
        forecast: dict[str, Any] | None = None,
        planner: dict[str, Any] | None = None,
    ) -> str:
        """Record the run and its plan in one append (``planner``: the call that planned it, if one did)."""
        plan.check()
        run_id = run_id or new_run_id()
        created = {
            "forecast": forecast,
            "task": options.task,
            "input": options.input_path,
            "options": options.to_dict(),
            "owner": owner(),
        }
        await self.log.emit_events(
            run_id, [(EventType.RUN_CREATED, created), (EventType.PLAN, plan_event_data(plan, planner))]
        )
        await create_sessions(self.log, self.gateway.router, run_id, plan, options)
        self._just_created.add(run_id)
        return run_id

    # -- phase 2: dispatch ----------------------------------------------------------------------
    async def dispatch(self, run_id: str, plan: Plan, options: RunOptions) -> DispatchStats:
        """Run every session that has not ended; apply budget raises while it runs."""
        fresh = run_id in self._just_created
        self._just_created.discard(run_id)
        records: dict[str, SessionRecord] = {}
        if not fresh:
            records = {r.session_id: r for r in await self.log.list_sessions(run_id)}
            await create_sessions(self.log, self.gateway.router, run_id, plan, options, existing=records)
        by_sid = {session_id_for(run_id, p.index): p for p in plan.partitions}
        todo = [(sid, p) for sid, p in by_sid.items() if sid not in records or not records[sid].state.terminal]
        root = plan.input_path if plan.kind is InputKind.DIRECTORY else None
        slots = self._slots_for(options)
        dispatcher = self._dispatcher(options, slots, root, sessions=len(todo))
        self._live[run_id] = _Live(dispatcher)
        self._last_run = run_id
        watcher = RunTicker(self, run_id, slots)
        watcher.shapes = await self._shape_watch(run_id, options, fresh)
        if not fresh:  # a fresh run has no raise nor result yet; a raise written meanwhile comes with the ticks
            await watcher.apply_recorded()
        live = await self._live_dedup(run_id, options, fresh)
        watcher.live = live
        try:
            await self._drive(watcher, dispatcher, todo, by_sid, slots, live)
        except BaseExceptionGroup as group:
            down = cause_of(group)
            if isinstance(down, ProviderError) and down.exit_code == 4:  # refused credentials, from a session
                down = self.gateway.provider_down() or ProviderDown(str(down))
            if not isinstance(down, ProviderDown):
                raise
            if watcher.shapes is not None:
                self._listeners.remove(watcher.shapes.heard)
            await watcher.store_snapshot()  # the figures so far, for status and metrics
            await self.store_metrics(run_id, self._admission_metrics.get(run_id, b""))
            raise down from None
        if watcher.shapes is not None:
            self._listeners.remove(watcher.shapes.heard)
        await watcher.store_snapshot()
        await self.flush_routes()
        return dispatcher.stats

    def _dispatcher(self, options: RunOptions, slots: SessionSlots, root: str | None, *, sessions: int) -> Dispatcher:
        """The run's dispatcher over this engine's log and gateway, with the workforce's parts."""
        base = DispatchOptions(
            session_timeout=options.timeout,
            start_ahead=max(16, 2 * options.max_concurrency),  # enough to fill every gateway slot twice
            max_attempts=options.max_attempts,
            limits=session_limits(options),
        )
        wf = self.workforce
        parts = wf.dispatch_parts(base, sessions=sessions, root=root) if wf is not None else {"options": base}
        return Dispatcher(
            log=self.log,
            gateway=self.gateway,
            brain=Harness,
            hands_for=lambda p: self.hands_for(p, root),
            slots=slots,
            clock=self.clock,
            **parts,
        )

    async def _live_dedup(self, run_id: str, options: RunOptions, fresh: bool) -> LiveDedup:
        """One consumer per dispatch; the aggregator (what is clustered so far) carries over. On resume
        it is fed the results recorded so far."""
        earlier = self._dedup.get(run_id)
        aggregator = earlier.aggregator if earlier is not None else self._aggregator(run_id, options)
        live = self._dedup[run_id] = LiveDedup(aggregator, clock=self.clock)
        if not fresh:
            recorded = await self.log.events_of_run(run_id, [EventType.RESULT_ITEM])
            live.feed([ResultItem.from_dict(e.data) for e in recorded])
        return live

    async def _drive(
        self,
        watcher: RunTicker,
        dispatcher: Dispatcher,
        todo: list[tuple[str, Partition]],
        by_sid: dict[str, Partition],
        slots: SessionSlots,
        live: LiveDedup,
    ) -> None:
        """One TaskGroup for the run: its sessions, the ticker, admission cycles, the provider watch and
        the live dedup; returns once no session is left to run."""
        stop = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            consumer = tg.create_task(live.consume())
            tg.create_task(slots.run(stop))  # admission cycles (LocalSlots: returns at once)
            health = tg.create_task(self._watch_provider())
            runs = [tg.create_task(dispatcher.run(todo))]
            poll = tg.create_task(watcher.poll_until(runs, dispatcher, by_sid, tg))
            while True:
                # The watcher may add runs while we wait; no await between the check and the cancel.
                while pending := [t for t in runs if not t.done()]:
                    await asyncio.wait(pending)
                poll.cancel()
                # a raise that came in just as the last session paused still counts
                if not await watcher.tick(runs, dispatcher, by_sid, tg):
                    break
                poll = tg.create_task(watcher.poll_until(runs, dispatcher, by_sid, tg))
            health.cancel()
            stop.set()
            live.finish()
            await consumer

    async def _shape_watch(self, run_id: str, options: RunOptions, fresh: bool) -> ShapeWatch | None:
        """With fleet.yaml ``supervision.shape.pause``: the run's live shape tallies (seeded from the
        log on resume), which the ticker asks for sessions to pause."""
        policy = load_config(options.config_path).supervision.shape
        if not policy.pause:
            return None
        watch = ShapeWatch(run_id, policy)
        if not fresh:
            watch.heard(await self.log.events_of_run(run_id, _SHAPE_WATCH_TYPES))
            alarms = [e.data for e in await self.log.get_events(run_id) if e.type == EventType.ALARM]
            watch.recorded([f"{a.get('kind')}:{a.get('subject')}" for a in alarms])
        self._listeners.append(watch.heard)
        return watch

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

    async def _watch_provider(self) -> None:
        """Stop the run (raise ProviderDown) once the gateway says its provider cannot serve it."""
        while (down := self.gateway.provider_down()) is None:
            await asyncio.sleep(0.2)
        raise down

    def hands_for(self, partition: Partition, root: str | None) -> Hands:
        if self.workforce is not None:
            return self.workforce.hands_for(partition, root)
        if partition.kind is InputKind.DIRECTORY and root is not None:
            return PartitionFiles(root, partition.items)
        return _NoHands()

    def stats(self, run_id: str | None = None) -> DispatchStats | None:
        """A run's dispatch figures (default: the run dispatched last); None before its dispatch."""
        live = self._live.get(run_id or self._last_run or "")
        return live.dispatcher.stats if live is not None and live.dispatcher is not None else None

    # -- phase 3: aggregate ---------------------------------------------------------------------
    async def aggregate(self, run_id: str, options: RunOptions, plan: Plan | None = None) -> RunReport:
        if plan is None:
            _, plan = await load_run(self.log, run_id)
        sessions = await self.log.list_sessions(run_id)
        events = await self.log.events_of_run(run_id)
        out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
        unique, agg = await self._deduplicate(run_id, options, events)
        status = run_status(sessions)
        config = await asyncio.to_thread(load_config, options.config_path)
        await record_shape_alarms(self.log, run_id, config.supervision.shape, events=events)
        verified = None
        if status in ("completed", "partial") and unique:
            verified = await verify_run(
                log=self.log,
                gateway=self.gateway,
                run_id=run_id,
                plan=plan,
                run_model=options.model,
                config=config,
                unique=unique,
            )
            if verified is not None:
                unique = verified.results
        run_events = await self.log.get_events(run_id)
        figures = run_figures(sessions, events, run_events)
        run_rec = await self.log.get_session(run_id)
        created_at = run_rec.created_at if run_rec else time.time()
        duration_s = round(time.time() - created_at, 3)
        review = review_queue(run_id, run_events, events, config.supervision)
        audit = decision_audit(run_events, events, review)
        summary = run_summary(
            run_id=run_id,
            status=status,
            options=options,
            plan=plan,
            partitions=len(sessions),
            figures=figures,
            results_unique=len(unique),
            agg=agg,
            duration_s=duration_s,
            out_dir=out_dir,
            verification=verified.summary if verified is not None else None,
            review=review,
            audit=audit,
            run_events=run_events,
        )
        await store_model_signals(self.log, run_id, events, run_events, now=time.time())
        final = final_snapshot(run_id, figures, agg, concurrency_limit=self.gateway.limiter.total)
        metrics_text = render(final, admission=self._admission_metrics.get(run_id, b""))
        await self.log.put_snapshot(metrics_key(run_id), self._metrics_snapshot(run_id, metrics_text))
        spans = timeline(events, created_at)
        sections = [audit_markdown(audit, review)]
        await asyncio.to_thread(write_outputs, out_dir, summary, unique, timeline=spans, sections=sections)
        await asyncio.to_thread((out_dir / "metrics.prom").write_bytes, metrics_text)
        end_type = {
            "completed": EventType.RUN_COMPLETED,
            "paused": EventType.RUN_PAUSED,
            "interrupted": EventType.RUN_INTERRUPTED,
        }.get(status, EventType.RUN_FAILED)
        brief = {k: summary[k] for k in ("status", "results_raw", "results_unique", "dedup_rate", "cost_usd")}
        await self.log.emit_event(run_id, end_type, {"summary": brief})
        return RunReport(run_id, summary, tuple(unique), out_dir)

    async def _deduplicate(
        self, run_id: str, options: RunOptions, events: Sequence[Event]
    ) -> tuple[list[ResultItem], AggregateStats]:
        """Every recorded result through the run's aggregator (the live one, if it dispatched here):
        the unique results and the dedup figures, stored as the run's dedup snapshot."""
        raw = [ResultItem.from_dict(ev.data) for ev in events if ev.type == EventType.RESULT_ITEM]
        live = self._dedup.pop(run_id, None)
        aggregator = live.aggregator if live is not None else self._aggregator(run_id, options)
        try:
            await aggregator.extend(raw)  # what live dedup has not reached: no streaming decision redone at once
            unique = await aggregator.finalize()
            agg = aggregator.stats()
            await self.log.put_snapshot(snapshot_key(run_id), agg.to_dict())
            await self.record_embeddings(run_id)
        finally:
            if aggregator.cache is not None:
                aggregator.cache.close()
        return unique, agg

    # -- lifecycle --------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for live in self._dedup.values():
            if live.aggregator.cache is not None:
                live.aggregator.cache.close()
        if self.workforce is not None:
            try:
                await self.workforce.aclose()
            except Exception:  # the gateway and the store must close all the same
                _logger.exception("closing the workforce failed")
        close = getattr(self.gateway, "aclose", None)
        if close is not None:
            await close()
        if self.lease is not None:  # given back first (its epoch is kept: the writes still queued land)
            await self.lease.release()
        await self.log.close()


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
