"""One engine hosting many runs: what ``agent-fleet serve`` drives.

:class:`FleetHost` holds one :class:`~agent_fleet.engine.Engine` (one store, one gateway, one worker
pool), one :class:`AdmissionController` built from fleet.yaml ``queues:`` and a task per live run.
Every run's sessions are Workloads of the one controller (each run's slots leave driving it to the
host) and every model call goes through the one gateway, so its concurrency limit bounds the calls of
all runs together.

A run's own options are applied per session: its token and dollar caps become the caps of its
sessions in the shared gateway (the gateway's run-wide caps are the server's, from fleet.yaml).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from agent_fleet.admission import AdmissionController, default_objects
from agent_fleet.admission.slots import AdmissionSlots
from agent_fleet.clock import RealClock
from agent_fleet.config import FleetConfig, load_config
from agent_fleet.decompose.subtasks import needs_planner
from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.domain.ids import new_run_id, session_id_for
from agent_fleet.domain.plan import Plan
from agent_fleet.engine import Engine, RunReport, load_run, plan_run
from agent_fleet.engine.compose import assemble
from agent_fleet.engine.forecasting import forecast_for, learned_prior, observed_latency
from agent_fleet.engine.planning import plan_goal
from agent_fleet.engine.preflight import configured_queues
from agent_fleet.engine.records import owner, owner_alive
from agent_fleet.engine.run import DEFAULT_GRACE_S
from agent_fleet.errors import FleetError, UsageError, cause_of
from agent_fleet.options import RunOptions, with_config
from agent_fleet.session.lease import DEFAULT_TTL_S, LeaseKeeper, LeaseStore
from agent_fleet.spend.factory import build_gateway

__all__ = ["FleetHost", "RunConflict", "team_account"]

_logger = logging.getLogger(__name__)


class RunConflict(FleetError):
    """The run is in a state the request does not fit (resume a live run, cancel an ended one)."""

    exit_code = 2


class FleetHost:
    """Many runs, one engine. Use :meth:`open`; ``submit``/``resume`` start a run and return at once."""

    def __init__(
        self,
        engine: Engine,
        controller: AdmissionController,
        config: FleetConfig,
        config_path: str | None,
        workdir: Path,
        store: LeaseStore | None = None,
    ) -> None:
        self.engine = engine
        self._store = store  # the store under the engine's log: each run's lease is taken in it
        self.workdir = workdir
        self.controller = controller
        self.config = config
        self.config_path = config_path
        self.reports: dict[str, RunReport] = {}  # runs that ended in this process
        self.failures: dict[str, str] = {}  # run id → why its task ended with an error
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None

    # -- building -------------------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        store_url: str | None = None,
        config_path: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        workdir: str | None = None,
        grace: float = DEFAULT_GRACE_S,
    ) -> AsyncIterator[FleetHost]:
        """Open the store, the gateway, the worker pool and the controller (the engine is built as
        ``deploy``'s is, from one reading of fleet.yaml); on exit stop every live run (notify → drain →
        ``grace`` seconds → cancel: each is left resumable) and shut everything down."""
        config_path = await asyncio.to_thread(os.path.abspath, config_path) if config_path else None
        config = await asyncio.to_thread(load_config, config_path)
        queues = await asyncio.to_thread(configured_queues, config, config_path)
        clock = RealClock()
        controller = AdmissionController(queues or default_objects(config.rate_limit.baseline_concurrency), clock)
        anthropic = any(m.provider == "anthropic" for m in config.models[:1])
        async with assemble(
            config,
            config_path,
            store_url=store_url,
            gateway=lambda: build_gateway(config, run_id=None, env=env),
            check=check,
            workforce_id="serve",
            clock=clock,
            slots_for=_slots_of(controller),
            system="anthropic" if anthropic else "openai",
        ) as engine:
            host = cls(engine, controller, config, config_path, Path(workdir or os.getcwd()), store=engine.store)
            for name, team in config.teams.items():  # a team's dollars: one account over all its runs
                if team.budget_usd is not None:
                    engine.gateway.set_queue_budget(team_account(name), usd=team.budget_usd)
            stop = asyncio.Event()
            async with asyncio.TaskGroup() as tg:
                host._group = tg
                driver = tg.create_task(controller.run(stop))
                try:
                    yield host
                finally:
                    await engine.stop_runs(grace)  # every live run: notify → drain → grace → cancel
                    for task in host._tasks.values():
                        task.cancel()  # a run whose driver had not started yet
                    stop.set()
                    await asyncio.gather(driver, *host._tasks.values(), return_exceptions=True)

    # -- runs -----------------------------------------------------------------------------------
    def active(self, run_id: str) -> bool:
        task = self._tasks.get(run_id)
        return task is not None and not task.done()

    def live_runs(self) -> set[str]:
        return {run_id for run_id, task in self._tasks.items() if not task.done()}

    def local_queue(self, name: str | None) -> str:
        """The ``namespace/name`` key of a LocalQueue (UsageError when there is none of that name)."""
        lq = self.controller.objects.resolve_local_queue(name or "default")
        if lq is None:
            raise UsageError(f"no LocalQueue {name or 'default'!r} in this server's queues")
        return str(lq.key)

    def prepare(self, options: RunOptions) -> RunOptions:
        """A submitted run's options as the server runs them: its fleet.yaml, paths under the server's
        working directory, its defaults filled in."""
        options = replace(options, config_path=self.config_path)
        if options.input_path is not None:
            path = (self.workdir / options.input_path).resolve()
            if not path.is_relative_to(self.workdir.resolve()):
                raise UsageError(f"input {options.input_path!r} is outside the server's working directory")
            if not path.exists():
                raise UsageError(f"input {options.input_path!r} does not exist on the server")
            options = replace(options, input_path=str(path))
        self.local_queue(options.queue)
        return with_config(options, self.config)

    async def submit(self, options: RunOptions) -> str:
        """Record a new run (its plan, its forecast) and start it; returns its id at once."""
        options = self.prepare(options)
        run_id = new_run_id()
        planner = None
        if needs_planner(options.task, options.input_path, options.agents):
            plan, planner = await plan_goal(self.engine.gateway, run_id, options)
        else:
            plan = await asyncio.to_thread(plan_run, options)
        options = replace(options, out_dir=str(self.workdir / ".fleet" / "runs" / run_id))
        log = self.engine.log
        prior = await learned_prior(log, options, plan)
        predicted = forecast_for(options, plan, self.config, await observed_latency(log), prior)
        lease = await self._lease(run_id)
        try:
            await self.engine.create_run(plan, options, run_id=run_id, forecast=predicted, planner=planner)
        except BaseException:
            await _release(lease)
            raise
        self._start(run_id, plan, options, lease)
        return run_id

    async def _lease(self, run_id: str) -> LeaseKeeper | None:
        """The run's lease (RunOwned while another live engine holds it), renewed until the run stops."""
        if self._store is None:
            return None
        lease = await LeaseKeeper.take(self._store, run_id, ttl=DEFAULT_TTL_S)
        lease.start()
        return lease

    async def resume(self, run_id: str) -> RunOptions:
        """Continue a run of the store that no task of this server drives."""
        if self.active(run_id):
            raise RunConflict(f"run {run_id} is running")
        options, plan = await load_run(self.engine.log, run_id)
        options = await self._raised(run_id, options)
        lease = await self._lease(run_id)
        try:
            await self.engine.log.emit_event(run_id, EventType.RUN_RESUMED, {"owner": owner()})
        except BaseException:
            await _release(lease)
            raise
        self._start(run_id, plan, options, lease)
        return options

    async def _raised(self, run_id: str, options: RunOptions) -> RunOptions:
        """The run's caps as its run-wide raises (``budget_raised`` on the run) left them: ``_start`` sets
        them on each session, and the one gateway has no run of its own to apply a run's raise to."""
        tokens, usd = options.budget_tokens, options.budget_usd
        for ev in await self.engine.log.get_events(run_id):
            if ev.type == EventType.BUDGET_RAISED:
                tokens = int(ev.data["tokens"]) if ev.data.get("tokens") is not None else tokens
                usd = str(ev.data["usd"]) if ev.data.get("usd") is not None else usd
        return replace(options, budget_tokens=tokens, budget_usd=usd)

    async def recover(self) -> list[str]:
        """Resume every run of the store that was live and whose process is gone (a ``serve`` killed
        with ``kill -9``, a crashed ``deploy``): it goes on from its log. Returns their ids."""
        taken = []
        for rec in await self.engine.log.list_runs(limit=1000):
            if rec.state not in (SessionState.RUNNING, SessionState.CREATED) or self.active(rec.session_id):
                continue
            last_owner: dict[str, Any] = {}
            for ev in await self.engine.log.get_events(rec.session_id):
                if ev.type in (EventType.RUN_CREATED, EventType.RUN_RESUMED):
                    last_owner = ev.data.get("owner") or {}
            if owner_alive(last_owner, not_this_process=True):
                continue
            try:
                await self.resume(rec.session_id)
            except FleetError as exc:
                _logger.warning("run %s was not resumed: %s", rec.session_id, exc)
                continue
            taken.append(rec.session_id)
        return taken

    def cancel(self, run_id: str) -> None:
        """Stop a live run: its sessions are interrupted (``resume`` continues it)."""
        task = self._tasks.get(run_id)
        if task is None or task.done():
            raise RunConflict(f"run {run_id} is not running")
        task.cancel()

    async def wait(self, run_id: str) -> None:
        """Until the task of this server that drives the run ends (at once when none does). Cancelling
        the wait leaves the run going."""
        task = self._tasks.get(run_id)
        if task is not None:
            await asyncio.wait({task})

    def _start(self, run_id: str, plan: Plan, options: RunOptions, lease: LeaseKeeper | None) -> None:
        if self._group is None:
            raise RunConflict("the server is not open")
        gateway = self.engine.gateway
        tokens = options.budget_tokens
        usd = Decimal(options.budget_usd) if options.budget_usd is not None else None
        team = options.team if options.team in self.config.teams else None
        for p in plan.partitions:  # the run's own caps, in the one gateway; its team's account above them
            sid = session_id_for(run_id, p.index)
            gateway.set_session_budget(sid, tokens=tokens, usd=usd)
            if team is not None:
                gateway.register_session(sid, queue=team_account(team))
        self.failures.pop(run_id, None)
        self._tasks[run_id] = self._group.create_task(self._drive(run_id, plan, options, lease))

    async def _drive(self, run_id: str, plan: Plan, options: RunOptions, lease: LeaseKeeper | None) -> None:
        try:
            await self._run(run_id, plan, options)
        finally:
            await asyncio.shield(_release(lease))

    async def _run(self, run_id: str, plan: Plan, options: RunOptions) -> None:
        try:
            self.reports[run_id] = await self.engine.run(run_id, plan, options)
        except asyncio.CancelledError:
            with suppress(Exception):
                await asyncio.shield(
                    self.engine.log.emit_event(run_id, EventType.RUN_INTERRUPTED, {"reason": "cancel"})
                )
        except Exception as exc:  # one run's failure never stops the server
            _logger.exception("run %s failed", run_id)
            cause = cause_of(exc)
            self.failures[run_id] = str(cause) if isinstance(cause, FleetError) else type(cause).__name__
            with suppress(Exception):
                await self.engine.log.emit_event(run_id, EventType.RUN_FAILED, {"error": self.failures[run_id]})

    def run_budget_raise(self, run_id: str, session_ids: list[str], data: Mapping[str, Any]) -> None:
        """A run-wide raise: the new caps for every session of the run in the gateway (the run's
        ticker then sends its budget-paused sessions back in)."""
        tokens = data.get("tokens")
        usd = data.get("usd")
        for sid in session_ids:
            self.engine.gateway.set_session_budget(sid, tokens=tokens, usd=usd)


async def _release(lease: LeaseKeeper | None) -> None:
    if lease is not None:
        with suppress(Exception):
            await lease.release()


def team_account(team: str) -> str:
    """The gateway account every session of a team's runs is charged to (fleet.yaml ``budget_usd``)."""
    return f"team:{team}"


def _slots_of(controller: AdmissionController) -> Callable[[RunOptions], AdmissionSlots]:
    """Each run's sessions as Workloads of the one controller, which the host drives."""

    def slots(options: RunOptions) -> AdmissionSlots:
        return AdmissionSlots(
            controller, queue=options.queue or "default", priority_class=options.priority, drive=False
        )

    return slots
