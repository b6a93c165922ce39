"""A run's workforce: the worker pool, the hands and CLI agents — part of the composition root.

Only :mod:`agent_fleet.engine` builds one (it wires implementations together, as the engine does).
Per run it holds:

* the **hands**: a :class:`~agent_fleet.hands.toolbox.Toolbox` giving each partition the minimal
  toolset it needs (directory partitions the scoped file tools, URL lists ``fetch_url``, plus what
  fleet.yaml ``hands.tools`` adds by input kind: ``run_command`` or MCP toolsets), sandboxes
  provisioned lazily on the first tool call that needs one, and one shared MCP client pool;
* the **worker pool** the dispatcher leases sessions onto (fleet.yaml ``dispatch``);
* for ``--agent-cmd`` runs, the in-process **gateway service** CLI agents call with their own
  per-session token, and the session body that runs them;
* with ``dispatch.executor`` a Ray cluster, the **Ray executor** (:mod:`agent_fleet.cluster`): node
  workers on the cluster take the place of this process's slots (the one hook: :meth:`Workforce.open`
  starts it, :meth:`dispatch_parts` gives its pool and session body, :meth:`aclose` stops it);
* the **reaper**: when the workforce opens, what dead engines left (sandbox processes, worktrees,
  MCP server processes) is removed; when it closes, nothing of this run is left behind.

Sandboxes of a run live under ``<sandbox root>/<run id>``, so closing one engine never touches the
sandboxes of another engine in the same process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_fleet.clock import Clock, RealClock
from agent_fleet.config import FleetConfig, load_config
from agent_fleet.dispatch.autoscale import AutoscaleConfig, Autoscaler
from agent_fleet.dispatch.cli_session import CallRecorder, CliSessions
from agent_fleet.dispatch.health import HealthConfig
from agent_fleet.dispatch.pool import WorkerPool, WorkerSpec
from agent_fleet.dispatch.runner import DispatchOptions, Interposer
from agent_fleet.domain.plan import Partition
from agent_fleet.errors import ConfigError
from agent_fleet.hands.cli_agents import CliAgentSpec, CommandAgent
from agent_fleet.hands.cli_check import check_agent_command, visible_roots
from agent_fleet.hands.mcp_pool import McpPool, McpServerConfig
from agent_fleet.hands.port import Hands, WorkspaceChanges
from agent_fleet.hands.reaper import Reaper, ReapReport
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig, SandboxProvider
from agent_fleet.hands.shell import RUN_COMMAND
from agent_fleet.hands.toolbox import Toolbox
from agent_fleet.hands.web import EgressPolicy
from agent_fleet.session.lease import LeaseStore
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.service import GatewayService

if TYPE_CHECKING:
    from agent_fleet.cluster.executor import RayExecutor

__all__ = ["Workforce", "default_sandbox_root", "reap_sandboxes"]

_CLI_TIMEOUT = 900.0  # hard wall clock of one CLI agent run when --timeout is not given
_CLI_GRACE = 30.0  # the dispatcher's own timeout waits this much longer than the CLI's


def default_sandbox_root() -> Path:
    """``agent-fleet-<uid>`` under the system temp directory: reachable by an unprivileged sandbox
    user (unlike a 0700 home), and the same for every run of this user, so the reaper finds it."""
    return Path(tempfile.gettempdir()) / f"agent-fleet-{os.geteuid()}"


def _prepare_root(configured: str | None, config_path: str | None) -> Path:
    """The sandbox root (relative to fleet.yaml's directory when configured relative), created."""
    root = Path(configured) if configured else default_sandbox_root()
    if config_path and not root.is_absolute():
        root = Path(config_path).resolve().parent / root
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    st = os.lstat(root)
    if st.st_uid != os.geteuid() or root.is_symlink():
        raise ConfigError(f"sandbox root {root} belongs to someone else; set hands.sandbox_root in fleet.yaml")
    return root


def reap_sandboxes(base: Path, *, run_id: str | None = None) -> ReapReport:
    """Remove what dead engines left under ``base`` (and their marked processes anywhere); with
    ``run_id``, also every sandbox of that run this process still holds. Empty run directories go."""
    total = ReapReport()
    try:
        dirs = sorted(p for p in base.iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        dirs = []
    if not dirs:
        dirs = [base / (run_id or "-")]  # still sweep processes of dead owners (MCP servers)
    for run_dir in dirs:
        live: set[str] | None = set() if run_dir.name == run_id else None
        report = Reaper(run_dir).reap(live_session_ids=live)
        total.sandboxes += report.sandboxes
        total.worktrees += report.worktrees
        total.processes += report.processes
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only when empty
    return total


def _wrapped(local: LocalSandboxProvider, wrap: Callable[[SandboxProvider], SandboxProvider] | None) -> SandboxProvider:
    return local if wrap is None else wrap(local)


@dataclass(frozen=True, slots=True, kw_only=True)
class _CliSetup:
    spec: CliAgentSpec
    service: GatewayService
    recorder: CallRecorder


async def _open_ray(
    executor: str,
    workforce: Workforce,
    gateway: Gateway,
    log: SessionLog,
    store_url: str | None,
    run_epoch: int | None,
    model: str,
) -> RayExecutor:
    """The Ray executor of a run (``dispatch.executor``); CLI agents run in this process only."""
    from agent_fleet.cluster.executor import RayExecutor

    if workforce._cli is not None:
        raise ConfigError("--agent-cmd runs CLI agents in this process; use --executor local with it")
    if not isinstance(log, LeaseStore):
        raise ConfigError("the Ray executor needs a session store with leases (PostgreSQL)")
    return await RayExecutor.open(
        executor=executor,
        config=workforce.config,
        run_id=workforce.run_id,
        store_url=store_url or "",
        store=log,
        run_epoch=run_epoch,
        gateway=gateway,
        default_model=model,
        clock=workforce.clock,
    )


class Workforce:
    """Built by :meth:`open` in the engine's task; :meth:`aclose` must run in that same task."""

    def __init__(
        self,
        *,
        run_id: str,
        config: FleetConfig,
        clock: Clock,
        sandbox_root: Path,
        sandboxes: SandboxProvider | None,
        resources: ResourceSpec,
        sandbox_factory: Callable[[], SandboxProvider] | None = None,
        mcp: McpPool | None,
        cli: _CliSetup | None,
        interpose: Interposer | None,
        ray: RayExecutor | None = None,
    ) -> None:
        self.run_id = run_id
        self.ray = ray
        self.config = config
        self.clock = clock
        self.sandbox_root = sandbox_root
        self.sandboxes = sandboxes
        self._sandbox_factory = sandbox_factory  # a run that makes changes needs sandboxes anyway
        self.resources = resources
        self.mcp = mcp
        self._cli = cli
        self._interpose = interpose
        self._toolboxes: dict[tuple[str | None, WorkspaceChanges | None], Toolbox] = {}
        self.pools: list[WorkerPool] = []  # one per dispatch, for inspection
        self.reaped: ReapReport = ReapReport()
        self._check_sandboxes: SandboxProvider | None = None
        self._closed = False

    @classmethod
    async def open(
        cls,
        *,
        run_id: str,
        config_path: str | None,
        gateway: Gateway,
        log: SessionLog,
        config: FleetConfig | None = None,
        clock: Clock | None = None,
        agent_cmd: str | None = None,
        agent_format: str = "jsonl",
        timeout: float | None = None,
        interpose: Interposer | None = None,
        wrap_sandboxes: Callable[[SandboxProvider], SandboxProvider] | None = None,
        executor: str = "local",
        store_url: str | None = None,
        run_epoch: int | None = None,
        model: str = "",
    ) -> Workforce:
        """Reap what dead engines left, then start what this run needs (MCP servers, the gateway
        service for CLI agents). ``config``: the engine's reading of fleet.yaml (``config_path``, which
        relative paths in it are relative to; read here when not given). ``interpose`` and
        ``wrap_sandboxes`` are test hooks (faults)."""
        if config is None:
            config = await asyncio.to_thread(load_config, config_path)
        hands = config.hands
        base = await asyncio.to_thread(_prepare_root, hands.sandbox_root, config_path)
        reaped = await asyncio.to_thread(reap_sandboxes, base)
        resources = ResourceSpec.of({"cpu": hands.cpu, "memory": hands.memory})
        use_bwrap = {"auto": None, "bwrap": True, "plain": False}[hands.isolation]
        # a CLI agent's own installation (its npm packages, its virtualenv) is visible read-only
        programs = visible_roots(agent_cmd) if agent_cmd is not None else ()
        sandbox_config = SandboxConfig(
            root=base / run_id, use_bwrap=use_bwrap, allow_network=hands.allow_network, ro_paths=programs
        )
        wants_sandbox = agent_cmd is not None or hands.files == "sandbox"
        wants_sandbox = wants_sandbox or any(RUN_COMMAND.name in names for names in hands.tools.values())
        sandboxes: SandboxProvider | None = None
        if wants_sandbox:
            local = LocalSandboxProvider(sandbox_config)
            sandboxes = local if wrap_sandboxes is None else wrap_sandboxes(local)
            if agent_cmd is not None:  # it must start in there, or the run is not recorded (exit 2)
                await check_agent_command(agent_cmd, local, resources, isolation=local.isolation)
        cli: _CliSetup | None = None
        if agent_cmd is not None:
            spec = CliAgentSpec(
                command=agent_cmd,
                format=agent_format,
                timeout=timeout or _CLI_TIMEOUT,
                resources=resources,
                egress=hands.allow_network,
            )
            recorder = CallRecorder(log, gateway)
            cli = _CliSetup(spec=spec, service=GatewayService(gateway, on_call=recorder), recorder=recorder)
        mcp: McpPool | None = None
        if config.mcp_servers:
            mcp = McpPool([McpServerConfig.from_mapping(n, d) for n, d in sorted(config.mcp_servers.items())])
        workforce = cls(
            run_id=run_id,
            config=config,
            clock=clock or RealClock(),
            sandbox_root=base,
            sandboxes=sandboxes,
            sandbox_factory=lambda: _wrapped(LocalSandboxProvider(sandbox_config), wrap_sandboxes),
            resources=resources,
            mcp=mcp,
            cli=cli,
            interpose=interpose,
        )
        workforce.reaped = reaped
        try:
            if mcp is not None:
                await mcp.start()
            if cli is not None:
                await cli.service.start()
            if executor != "local":
                workforce.ray = await _open_ray(executor, workforce, gateway, log, store_url, run_epoch, model)
        except BaseException:
            await workforce.aclose()
            raise
        return workforce

    # -- hands ------------------------------------------------------------------------------------
    def _toolbox(self, root: str | None, changes: WorkspaceChanges | None = None) -> Toolbox:
        box = self._toolboxes.get((root, changes))
        if box is None:
            hands = self.config.hands
            hosts = frozenset(hands.allowed_hosts) if hands.allowed_hosts is not None else None
            edits = changes is not None  # the run keeps its sessions' changes: they edit worktrees of its base
            if edits and self.sandboxes is None and self._sandbox_factory is not None:
                self.sandboxes = self._sandbox_factory()  # write_file, edit_file and run act in one
            box = self._toolboxes[(root, changes)] = Toolbox(
                run_id=self.run_id,
                input_root=Path(root) if root is not None else None,
                sandboxes=self.sandboxes,
                resources=self.resources,
                egress=EgressPolicy(allowed_hosts=hosts),
                mcp=self.mcp,
                shell=False,  # run_command only where fleet.yaml asks for it
                files_in_sandbox=hands.files == "sandbox",
                edits=edits,
                changes=changes,
            )
        return box

    def toolset(
        self, partition: Partition, root: str | None = None, changes: WorkspaceChanges | None = None
    ) -> Partition:
        """The partition with fleet.yaml's extra toolsets for its input kind added."""
        extra = self.config.hands.tools
        add = [*extra.get("all", ()), *extra.get(str(partition.kind), ())]
        if not add:
            return partition
        base = partition.tools or tuple(sorted(self._toolbox(root, changes).wanted(partition)))
        return replace(partition, tools=tuple(dict.fromkeys([*base, *add])))

    def hands_for(self, partition: Partition, root: str | None, changes: WorkspaceChanges | None = None) -> Hands:
        """``changes``: the run keeps its sessions' changes (a sandbox is a worktree of its base, and
        a directory partition's tools read and edit it)."""
        return self._toolbox(root, changes).hands_for(self.toolset(partition, root, changes))

    def check_sandboxes(self) -> SandboxProvider:
        """Where a run's checks run: the run's own sandbox provider (one is made with fleet.yaml's
        ``hands`` settings when the sessions need none); under the run's root, so the reaper covers them."""
        if self._check_sandboxes is None:
            if self.sandboxes is not None:
                self._check_sandboxes = self.sandboxes
            else:
                hands = self.config.hands
                use_bwrap = {"auto": None, "bwrap": True, "plain": False}[hands.isolation]
                root = self.sandbox_root / self.run_id
                config = SandboxConfig(root=root, use_bwrap=use_bwrap, allow_network=hands.allow_network)
                self._check_sandboxes = LocalSandboxProvider(config)
        return self._check_sandboxes

    # -- dispatch ---------------------------------------------------------------------------------
    def pool(self, sessions: int) -> WorkerPool:
        """One execution slot per session plus spares as backups (or fleet.yaml ``dispatch.workers``)."""
        d = self.config.dispatch
        pool = WorkerPool(self.clock, health=self._health())
        n = d.workers or sessions + max(2, math.ceil(sessions / 10))
        if d.autoscale is not None:  # start warm; the autoscaler grows it from the queue
            n = max(d.autoscale.min_workers, d.autoscale.warm)
        for i in range(n):
            pool.register(WorkerSpec(worker_id=f"w{i:05d}"))
        self.pools.append(pool)
        return pool

    def _health(self) -> HealthConfig:
        d = self.config.dispatch
        return HealthConfig(
            heartbeat_interval=d.check_interval_s,
            dead_after=max(3.0, 3 * d.check_interval_s),
            hung_after=d.hung_after_s,
            trip_after=d.trip_after,
            cooldown=d.breaker_cooldown_s,
            max_cooldown=max(300.0, d.breaker_cooldown_s),
        )

    def dispatch_parts(
        self, options: DispatchOptions, *, sessions: int, root: str | None, changes: WorkspaceChanges | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for :class:`~agent_fleet.dispatch.runner.Dispatcher` besides the ports;
        ``changes``: the run keeps its sessions' changes."""
        d = self.config.dispatch
        options = replace(options, check_interval=d.check_interval_s, max_reassignments=d.max_reassignments)
        if self.ray is not None:  # node workers on the cluster instead of this process's slots
            pool = self.ray.pool(self._health())
            self.pools.append(pool)
            return {"pool": pool, "body": self.ray.body(pool, options.limits, root, changes), "options": options}
        parts: dict[str, Any] = {"pool": self.pool(sessions), "interpose": self._interpose}
        if d.autoscale is not None:
            a = d.autoscale
            parts["autoscaler"] = Autoscaler(
                self.clock,
                AutoscaleConfig(
                    min_workers=a.min_workers,
                    max_workers=a.max_workers,
                    warm=a.warm,
                    target_load=a.target_load,
                    latency_slo=a.latency_slo_s,
                    step_up=a.step_up,
                    step_down=a.step_down,
                    down_cooldown=a.down_cooldown_s,
                ),
            )
        if self._cli is not None:
            if self.sandboxes is None:  # pragma: no cover - open() always builds one for CLI runs
                raise ConfigError("CLI agents need a sandbox provider")
            # The CLI's own hard timeout fires first and reports; this one is the backstop.
            options = replace(options, session_timeout=self._cli.spec.timeout + _CLI_GRACE)
            agent = CommandAgent(self._cli.spec, self.sandboxes, Path(root) if root is not None else None, changes)
            parts["body"] = CliSessions(agent, endpoint=self._cli.service, recorder=self._cli.recorder)
        parts["options"] = options
        return parts

    @property
    def service(self) -> GatewayService | None:
        return self._cli.service if self._cli is not None else None

    # -- lifecycle --------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Stop the gateway service and the MCP servers, then reap every sandbox of this run."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.ray is not None:
                await self.ray.aclose()
            if self._cli is not None:
                await self._cli.service.aclose()
        finally:
            try:
                if self.mcp is not None:
                    await self.mcp.aclose()
            finally:
                report = await asyncio.to_thread(reap_sandboxes, self.sandbox_root, run_id=self.run_id)
                self.reaped.sandboxes += report.sandboxes
                self.reaped.worktrees += report.worktrees
                self.reaped.processes += report.processes

    def __repr__(self) -> str:
        return f"Workforce(run={self.run_id}, ray={self.ray!r}, sandboxes={self.sandboxes!r}, mcp={self.mcp!r})"
