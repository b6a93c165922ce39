"""One engine hosting many runs: what ``agent-fleet serve`` drives.

:class:`FleetHost` holds one :class:`~agent_fleet.engine.Engine` (one store, one gateway, one worker
pool), one :class:`AdmissionController` built from fleet.yaml ``queues:`` and a task per live run.
Every run's sessions are Workloads of the one controller (each run's slots leave driving it to the
host) and every model call goes through the one gateway, so its concurrency limit bounds the calls of
all runs together.

A run's own options are applied per session: its token and dollar caps become the caps of its
sessions in the shared gateway (the gateway's run-wide caps are the server's, from fleet.yaml).

Every door (REST, ``deploy --server``, A2A, the MCP tool through a server) submits through
:meth:`FleetHost.submit`: the caller's input confined to its folders (:mod:`.inputs`), the run's options
checked by the one check ``deploy`` runs, the queue the caller's — all before anything is recorded. The
runs it records say so (``via: serve`` in ``run_created``): on start the server resumes those of its
runs that were left running, never a command line's.
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

from agent_fleet.clock import RealClock
from agent_fleet.config import FleetConfig, load_config
from agent_fleet.control.inputs import OUTPUT_DIR, Confinement, write_items
from agent_fleet.control.teams import Caller
from agent_fleet.domain.accounts import AccountScope, queue_account
from agent_fleet.domain.decode import decode, decode_as
from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.domain.ids import new_run_id, session_id_for
from agent_fleet.domain.payloads import BudgetRaised, RunCreated, RunResumed
from agent_fleet.domain.plan import Plan
from agent_fleet.engine import (
    DEFAULT_GRACE_S,
    DEFAULT_TTL_S,
    AdmissionController,
    AdmissionSlots,
    Engine,
    GroupOf,
    KueueObjects,
    LeaseKeeper,
    LeaseStore,
    RunReport,
    Spend,
    TeamTally,
    assemble,
    build_gateway,
    check_base,
    check_changes,
    check_queue_budgets,
    check_run_options,
    configured_queues,
    default_queue_objects,
    forecast_for,
    learned_prior,
    load_run,
    needs_planner,
    observed_latency,
    owner,
    owner_alive,
    plan_goal,
    plan_run,
    queues_source,
    resolve_store_url,
    seed_tallies,
    session_slots,
    store_file,
)
from agent_fleet.errors import BudgetExhausted, ConfigError, FleetError, Refused, UsageError, cause_of
from agent_fleet.options import RunOptions, call_shape, with_config

__all__ = ["SERVE", "FleetHost", "RunConflict", "check_teams"]

SERVE = "serve"  # ``via`` of the runs a server recorded (``run_created``)
_ADMIN = Caller(None)

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
        confinement: Confinement | None = None,
    ) -> None:
        self.engine = engine
        self._store = store  # the store under the engine's log: each run's lease is taken in it
        self.workdir = workdir
        self.controller = controller
        self.config = config
        self.config_path = config_path
        self.confinement = confinement or Confinement.build(
            workdir=workdir, teams=config.teams, config_path=config_path, store_file=None
        )
        self.reports: dict[str, RunReport] = {}  # runs that ended in this process
        self.failures: dict[str, str] = {}  # run id → why its task ended with an error
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None
        self.seeded: dict[tuple[AccountScope, str], Spend] = {}  # what the store said when the server opened

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
        protect: tuple[str, ...] = (),
    ) -> AsyncIterator[FleetHost]:
        """Open the store, the gateway, the worker pool and the controller (the engine is built as
        ``deploy``'s is, from one reading of fleet.yaml); on exit stop every live run (notify → drain →
        ``grace`` seconds → cancel: each is left resumable) and shut everything down. ``protect``: more
        of the server's own files no run may read (its TLS key and certificate). The teams' queues and
        input folders are checked before anything opens (ConfigError, one line)."""
        base = Path(workdir or os.getcwd())
        config_path = await asyncio.to_thread(os.path.abspath, config_path) if config_path else None
        config = await asyncio.to_thread(load_config, config_path)
        queues = await asyncio.to_thread(configured_queues, config, config_path)
        objects = queues or default_queue_objects(config.rate_limit.baseline_concurrency, config)
        check_teams(config, objects)
        kueue_file = queues_source(config, config_path) if queues is not None else None
        url = resolve_store_url(store_url)
        confinement = await asyncio.to_thread(
            Confinement.build,
            workdir=base,
            teams=config.teams,
            config_path=config_path,
            store_file=store_file(url),
            extra=(*protect, *([kueue_file] if isinstance(kueue_file, Path) else [])),
            create=True,
        )
        clock = RealClock()
        controller = AdmissionController(objects, clock)
        anthropic = any(m.provider == "anthropic" for m in config.models[:1])
        async with assemble(
            config,
            config_path,
            store_url=url,
            gateway=lambda: build_gateway(config, run_id=None, env=env),
            check=check,
            workforce_id="serve",
            clock=clock,
            slots_for=_slots_of(controller, config),
            system="anthropic" if anthropic else "openai",
        ) as engine:
            host = cls(engine, controller, config, config_path, base, store=engine.store, confinement=confinement)
            for name, team in config.teams.items():  # a team's dollars: one account over all its runs
                if team.budget_usd is not None:
                    engine.gateway.set_team_budget(name, usd=team.budget_usd)
            # the server's, its teams' and its queues' spend so far (a restart, a kill -9 included)
            host.seeded = await seed_tallies(engine.log, engine.gateway, _served_groups(config))
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

    async def prepare(
        self, options: RunOptions, caller: Caller = _ADMIN, *, items: list[Any] | None = None, name: str = ""
    ) -> RunOptions:
        """A submitted run's options as the server runs them, checked as ``deploy`` checks them (the one
        check: :func:`~agent_fleet.engine.preflight.check_run_options`): the caller's team, the server's
        fleet.yaml and defaults; its queue one the caller may use; its input confined to the caller's
        folders, or ``items`` written by the server as its input (``name``: the file's name). Raises
        before anything is recorded."""
        options = with_config(replace(options, config_path=self.config_path, team=caller.team), self.config)
        check_run_options(options, self.config, self.controller, git=False)  # on the loop: it reads the controller
        await asyncio.to_thread(check_changes, options)  # the same check's git part (--check, --push)
        queue = self.local_queue(options.queue)
        if not caller.may_use(queue):
            raise Refused(f"team {caller.team} may not use queue {queue} (its queues: {', '.join(caller.queues)})")
        if items is not None:
            if options.input_path is not None:
                raise UsageError("give items or input_path, not both")
            folder = self.workdir / OUTPUT_DIR / "items"
            path = await asyncio.to_thread(write_items, folder, name or new_run_id(), items)
            return replace(options, input_path=str(path))
        if options.input_path is not None:
            found = await asyncio.to_thread(self.confinement.confine, caller.team, options.input_path)
            options = replace(options, input_path=found)
        return options

    async def submit(
        self, options: RunOptions, caller: Caller = _ADMIN, *, items: list[Any] | None = None, name: str = ""
    ) -> str:
        """Check the run (:meth:`prepare`), record it (its plan, its forecast) and start it; returns its
        id at once. A team at its budget starts nothing (Refused)."""
        run_id = new_run_id()
        options = await self.prepare(options, caller, items=items, name=name or run_id)
        self._check_budget(caller)
        self.engine.assign(run_id, options)  # the planner's call is the team's and the queue's too
        planner = None
        if needs_planner(options.task, options.input_path, options.agents):
            try:
                plan, planner = await plan_goal(
                    self.engine.gateway, run_id, options, call_shape(options, self.config, options.model)
                )
            except BudgetExhausted as exc:
                raise Refused(str(exc)) from None
        else:
            plan = await asyncio.to_thread(plan_run, options)
        options = replace(options, out_dir=str(self.workdir / OUTPUT_DIR / "runs" / run_id))
        log = self.engine.log
        prior = await learned_prior(log, options, plan)
        predicted = forecast_for(options, plan, self.config, await observed_latency(log), prior)
        lease = await self._lease(run_id)
        try:
            await self.engine.create_run(plan, options, run_id=run_id, forecast=predicted, planner=planner, via=SERVE)
        except BaseException:
            await _release(lease)
            raise
        self._start(run_id, plan, options, lease)
        return run_id

    def _check_budget(self, caller: Caller) -> None:
        if caller.team is None or caller.team not in self.config.teams:
            return
        why = self.engine.gateway.book.account(AccountScope.TEAM, caller.team).why_exhausted()
        if why is not None:
            raise Refused(f"{why}: no new run starts until fleet.yaml raises it")

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
        await check_base(self.engine.log, run_id)
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
            raised = decode_as(ev, BudgetRaised)
            if raised is not None:
                tokens = raised.tokens if raised.tokens is not None else tokens
                usd = str(raised.usd) if raised.usd is not None else usd
        return replace(options, budget_tokens=tokens, budget_usd=usd)

    async def recover(self) -> list[str]:
        """Resume every run this server (or one before it on the same store) recorded that was left
        running and whose process is gone (a ``serve`` killed with ``kill -9``): it goes on from its
        log. A command line's runs and ended runs are left alone (``agent-fleet resume`` is theirs).
        Returns the ids resumed."""
        taken = []
        for rec in await self.engine.log.list_runs(limit=1000):
            if rec.state not in (SessionState.RUNNING, SessionState.CREATED) or self.active(rec.session_id):
                continue
            via: str | None = None
            last_owner: dict[str, Any] = {}
            for ev in await self.engine.log.get_events(rec.session_id):
                p = decode(ev)
                if isinstance(p, RunCreated):
                    via = p.via
                if isinstance(p, RunCreated | RunResumed):
                    last_owner = dict(p.owner)
            if via != SERVE or owner_alive(last_owner, not_this_process=True):
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
        for p in plan.partitions:  # the run's own caps, in the one gateway (its groups: Engine.assign)
            gateway.set_session_budget(session_id_for(run_id, p.index), tokens=tokens, usd=usd)
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
            cause = cause_of(exc)
            if isinstance(cause, FleetError):  # the engine's own word for it: one line
                _logger.error("run %s failed: %s", run_id, cause)
            else:
                _logger.exception("run %s failed", run_id)
            self.failures[run_id] = str(cause) if isinstance(cause, FleetError) else type(cause).__name__
            with suppress(Exception):
                await self.engine.log.emit_event(run_id, EventType.RUN_FAILED, {"error": self.failures[run_id]})

    # -- figures --------------------------------------------------------------------------------
    def team_figures(self, team: str) -> dict[str, Any]:
        """What a team spent as the gateway's meter counts it: every call of all its runs (agents,
        planner, verifier, embeddings, retries, re-sends), since the store began (durable)."""
        tally = self.engine.gateway.meter.group((AccountScope.TEAM.value, team))
        config = self.config.teams.get(team)
        return {
            "team": team,
            "budget_usd": None if config is None or config.budget_usd is None else str(config.budget_usd),
            "cost_usd": str(tally.cost_usd),
            "tokens": {"input": tally.input_tokens, "output": tally.output_tokens, "total": tally.total_tokens},
            "llm_calls": tally.calls,
            "errors": dict(tally.errors),
            "queues": list(config.queues) if config is not None else [],
        }

    def team_tallies(self) -> dict[str, TeamTally]:
        """Every team's figures for ``fleet_team_*`` (:meth:`team_figures`)."""
        out = {}
        for team in sorted(self.config.teams):
            tally = self.engine.gateway.meter.group((AccountScope.TEAM.value, team))
            out[team] = TeamTally(tally.total_tokens, tally.cost_usd, tally.calls, sum(tally.errors.values()))
        return out

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


def _served_groups(config: FleetConfig) -> GroupOf:
    """The accounts a run this server recorded is charged to: the server's (its run account), its
    LocalQueue's, its team's. A command line's runs are not the server's."""

    def groups(created: Mapping[str, Any]) -> list[tuple[AccountScope, str]]:
        if created.get("via") != SERVE:
            return []
        options = created.get("options") or {}
        found = [(AccountScope.RUN, "fleet"), (AccountScope.QUEUE, queue_account(options.get("queue")))]
        if options.get("team") in config.teams:
            found.append((AccountScope.TEAM, str(options["team"])))
        return found

    return groups


def check_teams(config: FleetConfig, objects: KueueObjects) -> None:
    """Every LocalQueue a team names, and every one ``budgets.queue_usd`` names, is one of the server's
    (ConfigError, one line: ``serve`` exits 2 before it listens)."""
    for name, team in sorted(config.teams.items()):
        for queue in team.queues:
            if objects.resolve_local_queue(queue) is None:
                known = ", ".join(sorted(objects.local_queues)) or "none"
                raise ConfigError(f"teams.{name}.queues: no LocalQueue {queue!r} among the server's (known: {known})")
    check_queue_budgets(config, objects)


def _slots_of(controller: AdmissionController, config: FleetConfig) -> Callable[[RunOptions], AdmissionSlots]:
    """Each run's sessions as Workloads of the one controller, which the host drives."""
    return lambda options: session_slots(controller, options, config, drive=False)
