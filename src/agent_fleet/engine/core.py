"""The composition root: builds the planes and runs decompose → dispatch → aggregate.

Only this module and ``cli/`` wire implementations together. :class:`Engine` owns the store,
the gateway and the dispatcher of one process; ``shutdown()`` is notify → drain → close and is
safe to call twice.

A run's own stream holds ``run_created`` and ``plan`` (written in one atomic append), so a run
can always be resumed from the store alone: ``resume`` reads the options and the plan back,
finishes every session that did not end, and aggregates again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from agent_fleet.admission import AdmissionController, KueueObjects, default_objects, load_kueue_yaml
from agent_fleet.admission.slots import AdmissionSlots
from agent_fleet.aggregate import (
    AggregateConfig,
    Aggregator,
    band_check,
    choose_embedder,
    classify_task,
    resolve_scope,
    write_outputs,
)
from agent_fleet.aggregate.live import LiveDedup, snapshot_key
from agent_fleet.brain.harness import Harness
from agent_fleet.brain.step import Limits
from agent_fleet.clock import Clock, RealClock
from agent_fleet.config import load_config
from agent_fleet.decompose import decompose
from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions, DispatchStats
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState
from agent_fleet.domain.ids import new_run_id, session_id_for
from agent_fleet.domain.model import EmbeddingResult
from agent_fleet.domain.plan import InputKind, Partition, Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.engine.forecasting import forecast_for, learned_prior, observed_latency
from agent_fleet.engine.run_ticker import RunTicker
from agent_fleet.engine.verification import verify_run
from agent_fleet.engine.workforce import Workforce
from agent_fleet.errors import (
    ConfigError,
    ProviderDown,
    ProviderError,
    ProviderUnreachable,
    SessionNotFound,
    UsageError,
    cause_of,
)
from agent_fleet.hands.files import PartitionFiles
from agent_fleet.hands.port import Hands, ToolOutput
from agent_fleet.observe.metrics import FleetSnapshot, ModelFigures, metrics_key, render
from agent_fleet.observe.summary import run_figures
from agent_fleet.observe.telemetry import open_telemetry
from agent_fleet.options import RunOptions, RunReport, exit_code_for, with_config
from agent_fleet.runtime import tuned_runtime
from agent_fleet.session.lease import DEFAULT_TTL_S, LeaseKeeper
from agent_fleet.session.port import SessionLog
from agent_fleet.session.store import open_store, resolve_store_url
from agent_fleet.session.tap import TappedLog
from agent_fleet.spend.factory import build_gateway
from agent_fleet.spend.forecast import beside_actuals
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.guards import RunawayGuard
from agent_fleet.spend.router import demotions, estimate_difficulty
from agent_fleet.supervise import (
    ShapeWatch,
    audit_markdown,
    decision_audit,
    queue_counts,
    recent_model_signals,
    record_shape_alarms,
    review_queue,
    store_model_signals,
)

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
        self._embeddings = _MeteredEmbeddings(gateway)  # provider embeddings, recorded in the run's log
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
            per_session = options.budget_tokens or 128_000
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
        stats = self.stats(run_id)
        live = self._dedup.get(run_id)
        dedup = live.aggregator.stats() if live is not None else None
        models = {
            name: ModelFigures(
                input_tokens=t.input_tokens,
                output_tokens=t.output_tokens,
                cached_input_tokens=t.cached_input_tokens,
                calls=t.calls,
                cost_usd=float(t.cost_usd),
                errors=dict(t.errors),
            )
            for name, t in self.gateway.meter.models.items()
        }
        sessions = {}
        if stats is not None:
            sessions = {
                "queued": stats.queued,
                "active": stats.active,
                "completed": stats.completed,
                "failed": stats.failed,
                "paused": stats.paused,
            }
        return FleetSnapshot(
            run_id=run_id,
            models=models,
            concurrency_limit=self.gateway.limiter.total,
            in_flight=self.gateway.statistics().in_flight,
            sessions=sessions,
            dedup_ratio=None if dedup is None else dedup.dedup_rate,
            results_raw=0 if dedup is None else dedup.raw,
            results_unique=0 if dedup is None else dedup.unique,
        )

    async def store_metrics(self, run_id: str, admission: bytes = b"") -> bytes:
        """Store the Prometheus text of the run (``agent-fleet metrics`` reads it) and return it."""
        self._admission_metrics[run_id] = admission
        text = render(self.metrics(run_id), admission=admission)
        await self.log.put_snapshot(metrics_key(run_id), {"text": text.decode()})
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

    def default_slots(self, options: RunOptions) -> SessionSlots:
        """Admission per fleet.yaml ``queues:``; without it one ClusterQueue whose ``pods`` quota is
        the run's concurrency (its number of agents)."""
        controller = AdmissionController(admission_objects(options), self.clock)
        return AdmissionSlots(controller, queue=options.queue or "default", priority_class=options.priority)

    # -- phase 1: record the plan ---------------------------------------------------------------
    async def create_run(
        self, plan: Plan, options: RunOptions, *, run_id: str | None = None, forecast: dict[str, Any] | None = None
    ) -> str:
        plan.check()
        run_id = run_id or new_run_id()
        created = {
            "forecast": forecast,
            "task": options.task,
            "input": options.input_path,
            "options": options.to_dict(),
            "owner": _owner(),
        }
        await self.log.emit_events(
            run_id, [(EventType.RUN_CREATED, created), (EventType.PLAN, {"plan": plan.to_dict()})]
        )
        await self._create_sessions(run_id, plan, options)
        self._just_created.add(run_id)
        return run_id

    async def _create_sessions(
        self, run_id: str, plan: Plan, options: RunOptions, existing: Collection[str] | None = None
    ) -> None:
        if existing is None:
            existing = {r.session_id for r in await self.log.list_sessions(run_id)}
        missing = [p for p in plan.partitions if session_id_for(run_id, p.index) not in existing]
        if not missing:
            return

        router = self.gateway.router
        demoted = await self._demoted(run_id, options) if router is not None else {}

        async def create(p: Partition) -> None:
            sid = session_id_for(run_id, p.index)
            model = options.model
            route = None
            if router is not None:  # fleet.yaml tiers: the partition's difficulty picks the model
                route = router.route(estimate_difficulty(p, plan.task), demoted=demoted).to_event()
                model = route["model"]
            info = {
                "run_id": run_id,
                "index": p.index,
                "partition_id": p.id,
                "partition": p.to_dict(),
                "task": plan.task,
                "input_root": plan.input_path,
                "model": model,
                "max_tokens": options.max_tokens,
            }
            events: list[tuple[str, dict[str, Any]]] = [(EventType.SESSION_CREATED, info)]
            if route is not None:
                events.append((EventType.ROUTE, route))
            await self.log.emit_events(sid, events)

        async with asyncio.TaskGroup() as tg:
            for p in missing:
                tg.create_task(create(p))

    async def _demoted(self, run_id: str, options: RunOptions) -> dict[str, tuple[str, ...]]:
        """Models under fleet.yaml ``supervision.quality`` over the recent runs; each demotion not
        recorded in the run yet becomes a ``model_demoted`` event of its stream."""
        policy = load_config(options.config_path).supervision.quality
        if not policy.enabled:
            return {}
        signals = await recent_model_signals(self.log, policy, now=time.time())
        found = demotions(signals, policy)
        recorded = {e.data.get("model") for e in await self.log.get_events(run_id) if e.type == EventType.MODEL_DEMOTED}
        new = [
            (EventType.MODEL_DEMOTED, {"model": m, "reasons": list(why), "signals": signals[m].to_dict()})
            for m, why in found.items()
            if m not in recorded
        ]
        if new:
            await self.log.emit_events(run_id, new)
        return found

    # -- phase 2: dispatch ----------------------------------------------------------------------
    async def dispatch(self, run_id: str, plan: Plan, options: RunOptions) -> DispatchStats:
        """Run every session that has not ended; apply budget raises while it runs."""
        fresh = run_id in self._just_created
        self._just_created.discard(run_id)
        records: dict[str, SessionRecord] = {}
        if not fresh:
            records = {r.session_id: r for r in await self.log.list_sessions(run_id)}
            await self._create_sessions(run_id, plan, options, existing=records)
        by_sid = {session_id_for(run_id, p.index): p for p in plan.partitions}
        todo = [(sid, p) for sid, p in by_sid.items() if sid not in records or not records[sid].state.terminal]
        root = plan.input_path if plan.kind is InputKind.DIRECTORY else None
        slots = self._slots_for(options)
        base = DispatchOptions(
            session_timeout=options.timeout,
            start_ahead=max(16, 2 * options.max_concurrency),  # enough to fill every gateway slot twice
            max_attempts=options.max_attempts,
            limits=_limits(options),
        )
        wf = self.workforce
        parts = wf.dispatch_parts(base, sessions=len(todo), root=root) if wf is not None else {"options": base}
        dispatcher = Dispatcher(
            log=self.log,
            gateway=self.gateway,
            brain=Harness,
            hands_for=lambda p: self.hands_for(p, root),
            slots=slots,
            clock=self.clock,
            **parts,
        )
        self._live[run_id] = _Live(dispatcher)
        self._last_run = run_id
        watcher = RunTicker(self, run_id, slots)
        watcher.shapes = await self._shape_watch(run_id, options, fresh)
        if not fresh:  # a fresh run has no raise nor result yet; a raise written meanwhile comes with the ticks
            await watcher.apply_recorded()
        # One consumer per dispatch; the aggregator (what is clustered so far) carries over.
        earlier = self._dedup.get(run_id)
        aggregator = earlier.aggregator if earlier is not None else self._aggregator(run_id, options)
        live = self._dedup[run_id] = LiveDedup(aggregator, clock=self.clock)
        if not fresh:
            recorded = await self.log.events_of_run(run_id, [EventType.RESULT_ITEM])
            live.feed([ResultItem.from_dict(e.data) for e in recorded])
        watcher.live = live
        stop = asyncio.Event()
        try:
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
        raw = [ResultItem.from_dict(ev.data) for ev in events if ev.type == EventType.RESULT_ITEM]
        out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
        live = self._dedup.pop(run_id, None)
        aggregator = live.aggregator if live is not None else self._aggregator(run_id, options)
        try:
            await aggregator.add_many(raw)
            unique = await aggregator.finalize()
            agg = aggregator.stats()
            await self.log.put_snapshot(snapshot_key(run_id), agg.to_dict())
            await self.record_embeddings(run_id)
        finally:
            if aggregator.cache is not None:
                aggregator.cache.close()
        status = _run_status(sessions)
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
        summary: dict[str, Any] = {
            "run_id": run_id,
            "status": status,
            "task": options.task,
            "input": options.input_path,
            "partitions": len(sessions),
            **figures.to_summary(),
            "results_unique": len(unique),
            "dedup_rate": round(agg.dedup_rate, 4),
            "dedup": agg.to_dict(),
            "dedup_scope": {"scope": agg.scope, "reason": agg.scope_reason},
            "dedup_band": band_check(classify_task(options.task, str(plan.kind)), agg).to_dict(),
            "duration_s": round(time.time() - created_at, 3),
            "out_dir": str(out_dir),
        }
        if verified is not None:
            summary["verification"] = verified.summary
            summary["needs_review"] = bool(verified.summary["needs_review"])
        review = review_queue(run_id, run_events, events, config.supervision)
        summary["review"] = queue_counts(review)
        summary["decisions"] = audit = decision_audit(run_events, events, review)
        await store_model_signals(self.log, run_id, events, run_events, now=time.time())
        for ev in run_events:
            if ev.type == EventType.RUN_CREATED and ev.data.get("forecast"):
                summary["forecast"] = beside_actuals(ev.data["forecast"], summary)
                break
        final = FleetSnapshot(
            run_id=run_id,
            models={
                m: ModelFigures(
                    input_tokens=f["input_tokens"],
                    output_tokens=f["output_tokens"],
                    cached_input_tokens=f["cached_input_tokens"],
                    calls=f["calls"],
                    cost_usd=float(f["cost_usd"]),
                    errors=f.get("errors", {}),
                )
                for m, f in figures.per_model.items()
            },
            concurrency_limit=self.gateway.limiter.total,
            in_flight=0,
            sessions={str(k): v for k, v in figures.sessions.items()},
            dedup_ratio=agg.dedup_rate,
            results_raw=agg.raw,
            results_unique=agg.unique,
        )
        metrics_text = render(final, admission=self._admission_metrics.get(run_id, b""))
        await self.log.put_snapshot(metrics_key(run_id), {"text": metrics_text.decode()})
        timeline = _timeline(events, created_at)
        sections = [audit_markdown(audit, review)]
        await asyncio.to_thread(write_outputs, out_dir, summary, unique, timeline=timeline, sections=sections)
        await asyncio.to_thread((out_dir / "metrics.prom").write_bytes, metrics_text)
        end_type = {
            "completed": EventType.RUN_COMPLETED,
            "paused": EventType.RUN_PAUSED,
            "interrupted": EventType.RUN_INTERRUPTED,
        }.get(status, EventType.RUN_FAILED)
        brief = {k: summary[k] for k in ("status", "results_raw", "results_unique", "dedup_rate", "cost_usd")}
        await self.log.emit_event(run_id, end_type, {"summary": brief})
        return RunReport(run_id, summary, tuple(unique), out_dir)

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


class _MeteredEmbeddings:
    """The gateway's embeddings, adding up what they cost so the run's log can record it."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self.usage = Usage()
        self.cost = Decimal(0)
        self.calls = 0

    async def embed(
        self, session_id: str, texts: Sequence[str], *, model: str, dimensions: int | None = None
    ) -> EmbeddingResult:
        result = await self._gateway.embed(session_id, texts, model=model, dimensions=dimensions)
        self.usage = self.usage + result.usage
        self.cost += result.cost_usd
        self.calls += 1
        return result

    def take(self) -> dict[str, Any] | None:
        """What was spent since the last take, as ``embeddings`` event data (None when nothing)."""
        if not self.calls:
            return None
        data = {"calls": self.calls, "usage": self.usage.to_dict(), "cost_usd": str(self.cost)}
        self.usage, self.cost, self.calls = Usage(), Decimal(0), 0
        return data


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


def admission_objects(options: RunOptions) -> KueueObjects:
    """The Kueue objects a run is admitted by: fleet.yaml ``queues:`` (a file beside it, or inline),
    else the default ClusterQueue sized to the run. Raises ConfigError (one line)."""
    config = load_config(options.config_path)
    if config.queues is None:
        return default_objects(options.agents)
    source: Any = config.queues
    if isinstance(source, str) and "\n" not in source.strip():
        path = Path(source)
        if options.config_path and not path.is_absolute():
            path = Path(options.config_path).resolve().parent / path
        if not path.is_file():
            raise ConfigError(f"{options.config_path or 'fleet.yaml'}: queues: no such file {str(path)!r}")
        source = path
    return load_kueue_yaml(source)


_EMBEDDERS = ("auto", "lexical", "minilm", "local", "provider")


def check_run_options(options: RunOptions) -> None:
    """What would fail a run once started, found before it is recorded: its --embedder, fleet.yaml,
    the queues file, the --queue and --priority names. Raises ConfigError/UsageError (exit 2)."""
    if options.embedder not in _EMBEDDERS:
        raise UsageError(f"unknown embedder {options.embedder!r}: use auto, lexical, minilm or provider")
    objects = admission_objects(options)
    queue = options.queue or "default"
    if objects.resolve_local_queue(queue) is None:
        known = ", ".join(sorted(objects.local_queues)) or "none"
        raise ConfigError(f"unknown --queue {queue!r}: no such LocalQueue (known: {known})")
    if options.priority is not None and options.priority not in objects.priority_classes:
        known = ", ".join(sorted(objects.priority_classes)) or "none"
        raise ConfigError(f"unknown --priority {options.priority!r}: no such WorkloadPriorityClass (known: {known})")


def _limits(options: RunOptions) -> Limits:
    """Per-session limits: max turns, and the runaway guard of fleet.yaml ``guards``."""
    guards = load_config(options.config_path).guards
    max_turns = options.max_turns or guards.max_turns

    def guard() -> RunawayGuard:
        return RunawayGuard(
            max_turns=max_turns,
            repeated_tool_calls=guards.repeated_tool_calls,
            no_progress_turns=guards.no_progress_turns,
        )

    return Limits(max_turns=max_turns, guard=guard)


def _run_status(sessions: list[SessionRecord]) -> str:
    states = [s.state for s in sessions]
    if any(st is SessionState.PAUSED for st in states):
        return "paused"
    if not all(st.terminal for st in states):
        return "interrupted"
    if any(st is SessionState.FAILED for st in states):
        return "partial" if any(st is SessionState.COMPLETED for st in states) else "failed"
    return "completed"


def _timeline(events: list[Event], origin: float) -> list[dict[str, Any]]:
    """Per session: first start and last end, in seconds since the run was created."""
    spans: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.type == EventType.SESSION_STARTED:
            spans.setdefault(ev.session_id, {"session_id": ev.session_id, "start": ev.time - origin})
        elif ev.type in (EventType.SESSION_COMPLETED, EventType.SESSION_FAILED, EventType.SESSION_PAUSED):
            span = spans.setdefault(ev.session_id, {"session_id": ev.session_id, "start": ev.time - origin})
            span["end"] = ev.time - origin
            span["state"] = ev.type.removeprefix("session_")
    return [s for s in spans.values() if "end" in s]


# -- building and the phase API ------------------------------------------------------------------


async def load_run(log: SessionLog, run_id: str) -> tuple[RunOptions, Plan]:
    """The options and the plan a run recorded."""
    try:
        state = await log.wake(run_id)
    except SessionNotFound:
        raise SessionNotFound(f"no run {run_id!r} in this store") from None
    if state.session.kind != "run":
        raise UsageError(f"{run_id!r} is an agent session, not a run")
    options: RunOptions | None = None
    plan: Plan | None = None
    for ev in state.events:
        if ev.type == EventType.RUN_CREATED:
            options = RunOptions.from_dict(ev.data["options"])
        elif ev.type == EventType.PLAN:
            plan = Plan.from_dict(ev.data["plan"])
    if options is None or plan is None:
        raise UsageError(f"run {run_id!r} has no recorded plan")
    return options, plan


@asynccontextmanager
async def open_engine(
    options: RunOptions,
    *,
    run_id: str,
    store_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    check: bool = True,
    slots: SessionSlots | None = None,
    wait: bool = False,
) -> AsyncIterator[Engine]:
    """Open the store, take the run's lease (RunOwned while another engine owns it, unless ``wait``),
    build the provider and the gateway; shut everything down on exit."""
    # What the flags left unset comes from fleet.yaml (the phase API may pass bare options).
    options = with_config(options, load_config(options.config_path))
    log = open_store(resolve_store_url(store_url))
    await log.open()
    try:
        lease = await LeaseKeeper.take(log, run_id, wait=wait, ttl=_lease_ttl())
    except BaseException:
        await log.close()
        raise
    lease.start()
    try:
        gateway = build_gateway(
            load_config(options.config_path),
            provider=options.provider,
            model=options.model,
            api_key=api_key,
            session_tokens=options.budget_tokens,
            session_usd=options.budget_usd,
            fleet_usd=options.fleet_budget_usd,
            concurrency=options.max_concurrency or None,
            run_id=run_id,
            clock=clock,
            env=env,
        )
        if check:
            try:
                providers = (gateway.provider, *gateway.routes.values())
                for url in sorted({str(getattr(p, "base_url", "")) for p in providers} - {""}):
                    await check_provider(url)
            except BaseException:
                await gateway.aclose()
                raise
    except BaseException:
        await lease.release()
        await log.close()
        raise
    try:  # reaps what a dead engine left before anything new starts (resume after kill -9)
        workforce = await Workforce.open(
            run_id=run_id,
            config_path=options.config_path,
            gateway=gateway,
            log=log,
            clock=clock,
            agent_cmd=options.agent_cmd,
            agent_format=options.agent_format,
            timeout=options.timeout,
        )
    except BaseException:
        await gateway.aclose()
        await lease.release()
        await log.close()
        raise
    engine = Engine(
        log=log,
        gateway=gateway,
        clock=clock,
        slots_for=(lambda _o: slots) if slots else None,
        workforce=workforce,
        lease=lease,
    )
    system = "anthropic" if options.provider == "anthropic" or options.model.startswith("claude") else "openai"
    telemetry = None
    try:
        telemetry = open_telemetry(os.environ, system=system)  # off (the default): None, nothing imported
        if telemetry is not None:
            engine.listen(telemetry.heard)
        with tuned_runtime():
            yield engine
    finally:
        await engine.shutdown()
        if telemetry is not None:
            telemetry.close()


async def check_provider(base_url: str, *, timeout: float = 5.0) -> None:
    """Raise ProviderUnreachable unless something answers HTTP at ``base_url`` (no credential sent).

    Over aiohttp, as the engine's own calls go (``spend/providers/_fast.py``), with the same
    ``trust_env=False``: the check reaches the provider the way the calls will.
    """
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False) as session,
            session.get(base_url.rstrip("/") + "/models") as response,
        ):
            await response.read()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        host = urlsplit(base_url).netloc or base_url
        raise ProviderUnreachable(f"model provider at {host} is unreachable") from None


def plan_run(options: RunOptions) -> Plan:
    """Phase 1: decompose the task and input into a checked plan."""
    budget = options.budget_tokens if options.budget_tokens is not None else 128_000
    return decompose(options.task, options.input_path, agents=options.agents, budget_tokens=budget)


async def estimate(options: RunOptions, *, store_url: str | None = None) -> dict[str, Any]:
    """``deploy --dry-run`` / ``agent-fleet estimate``: decompose and forecast; nothing is run or recorded."""
    options = await _resolved(options)
    config = await asyncio.to_thread(load_config, options.config_path)
    plan = await asyncio.to_thread(plan_run, options)
    latency = prior = None
    url = resolve_store_url(store_url)
    if not url.startswith("sqlite:///") or await asyncio.to_thread(os.path.exists, url.removeprefix("sqlite:///")):
        async with open_store(url) as log:
            latency = await observed_latency(log)
            prior = await learned_prior(log, options, plan)
    return {
        "task": options.task,
        "input": options.input_path,
        "plan": {
            "partitions": len(plan.partitions),
            "items": plan.total_items,
            "depth": plan.root.depth(),
            "largest_partition_tokens": max((p.est_tokens for p in plan.partitions), default=0),
            "notes": list(plan.notes),
        },
        "forecast": forecast_for(options, plan, config, latency, prior),
    }


async def _resolved(options: RunOptions) -> RunOptions:
    """Absolute paths (a run may be resumed from elsewhere) and fleet.yaml defaults filled in."""
    if options.input_path is not None:
        options = replace(options, input_path=await asyncio.to_thread(os.path.abspath, options.input_path))
    if options.config_path is not None:
        options = replace(options, config_path=await asyncio.to_thread(os.path.abspath, options.config_path))
    return with_config(options, await asyncio.to_thread(load_config, options.config_path))


async def deploy(
    options: RunOptions,
    *,
    store_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[str, Engine], None] | None = None,
    slots: SessionSlots | None = None,
    run_id: str | None = None,
) -> RunReport:
    """Decompose → dispatch → aggregate, end to end. ``on_start(run_id, engine)`` is called once the
    run is recorded (progress displays use ``engine.stats()``). ``run_id`` names the new run (a
    caller that must record the id before the run starts, e.g. a workflow's checkpoint)."""
    options = await _resolved(options)
    if slots is None:  # the caller's own slots admit by their own rules
        await asyncio.to_thread(check_run_options, options)
    elif options.embedder not in _EMBEDDERS:
        raise UsageError(f"unknown embedder {options.embedder!r}: use auto, lexical, minilm or provider")
    plan = await asyncio.to_thread(plan_run, options)
    run_id = run_id or new_run_id()
    if options.out_dir is None:
        options = replace(options, out_dir=str(Path.cwd() / ".fleet" / "runs" / run_id))
    async with open_engine(
        options, run_id=run_id, store_url=store_url, api_key=api_key, env=env, slots=slots
    ) as engine:
        config = await asyncio.to_thread(load_config, options.config_path)
        prior = await learned_prior(engine.log, options, plan)
        predicted = forecast_for(options, plan, config, await observed_latency(engine.log), prior)
        await engine.create_run(plan, options, run_id=run_id, forecast=predicted)
        return await _run_to_the_end(engine, run_id, plan, options, on_start)


async def resume(
    run_id: str,
    *,
    store_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[str, Engine], None] | None = None,
    slots: SessionSlots | None = None,
    wait: bool = False,
    retry_failed: bool = False,
) -> RunReport:
    """Continue an interrupted, crashed or budget-paused run from its log. Raises RunOwned while
    another live engine owns the run, unless ``wait`` (then it waits for the lease).

    A run that has ended is left as it is and its recorded summary returned (``on_start`` is not
    called), unless ``retry_failed`` and some session failed for good: those run again, from their
    logs, and the run is aggregated anew."""
    log = open_store(resolve_store_url(store_url))
    async with log:
        options, plan = await load_run(log, run_id)
        record = await log.get_session(run_id)
        failed = [s for s in await log.list_sessions(run_id) if s.state is SessionState.FAILED] if retry_failed else []
    if record is not None and record.state.terminal and not failed:
        ended = await asyncio.to_thread(_ended_report, run_id, options)
        if ended is not None:
            return ended
    if slots is None:
        await asyncio.to_thread(check_run_options, options)
    async with open_engine(
        options, run_id=run_id, store_url=store_url, api_key=api_key, env=env, slots=slots, wait=wait
    ) as engine:
        await engine.log.emit_event(run_id, EventType.RUN_RESUMED, {"owner": _owner(), "retry_failed": retry_failed})
        if retry_failed:  # read again under the lease: what failed for good runs again
            for rec in await engine.log.list_sessions(run_id):
                if rec.state is SessionState.FAILED:
                    await engine.log.emit_event(rec.session_id, EventType.SESSION_RESUMED, {"reason": "retry_failed"})
        return await _run_to_the_end(engine, run_id, plan, options, on_start)


def _ended_report(run_id: str, options: RunOptions) -> RunReport | None:
    """The report an ended run wrote (its summary.json and results.jsonl); None when they are gone."""
    out_dir = Path(options.out_dir or Path(".fleet") / "runs" / run_id)
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or summary.get("run_id") != run_id or "status" not in summary:
        return None
    results: tuple[ResultItem, ...] = ()
    try:
        with open(out_dir / "results.jsonl", encoding="utf-8") as f:
            results = tuple(ResultItem.from_dict(json.loads(line)) for line in f if line.strip())
    except (OSError, ValueError, KeyError, TypeError):
        results = ()
    return RunReport(run_id, summary, results, out_dir)


async def _run_to_the_end(
    engine: Engine, run_id: str, plan: Plan, options: RunOptions, on_start: Callable[[str, Engine], None] | None
) -> RunReport:
    """Phases 2 and 3 of a recorded run: dispatch what has not ended, then aggregate."""
    if on_start is not None:
        on_start(run_id, engine)
    await engine.dispatch(run_id, plan, options)
    return await engine.aggregate(run_id, options, plan)


def _lease_ttl() -> float:
    """Seconds a run's lease outlives its last heartbeat (``FLEET_LEASE_TTL``, default 30)."""
    raw = os.environ.get("FLEET_LEASE_TTL", "").strip()
    if not raw:
        return DEFAULT_TTL_S
    try:
        ttl = float(raw)
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise UsageError(f"FLEET_LEASE_TTL must be a positive number of seconds, got {raw!r}")
    return ttl


def _owner() -> dict[str, Any]:
    """Which process drives a run, so ``status`` can tell a live run from a crashed one."""
    return {"pid": os.getpid(), "host": socket.gethostname()}
