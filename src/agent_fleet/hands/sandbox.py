"""Local sandboxes: a real process per command, in the session's own workspace, under hard limits.

``LocalSandboxProvider.provision(resources, session_id=...)`` creates a workspace (a git worktree
for repository inputs) and returns a :class:`LocalSandbox`; ``Sandbox.run`` starts one process per
command with a scrubbed environment, rlimits, its own process group and a hard wall-clock timeout
that kills the whole group. :class:`LazySandbox` defers provisioning to the first tool call that
needs it, so a session starts its first model call at once.

See :mod:`agent_fleet.hands.isolation` for exactly what is enforced with and without bubblewrap.

Lifecycle: ``READY → CLOSED`` (``aclose``), or ``READY → DEAD`` when the workspace vanished. A
command killed from outside (OOM, a signal, its sandbox process dying) is reported in
:class:`CompletedRun` (``killed``), never raised: the model sees a tool error it can retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from agent_fleet.clock import Clock, RealClock
from agent_fleet.clock import timeout as clock_timeout
from agent_fleet.errors import FleetError
from agent_fleet.hands import isolation
from agent_fleet.hands._pipes import Capture, kill_group, read_fd, write_fd
from agent_fleet.hands.port import (
    CompletedRun,
    ProvisionOptions,
    Sandbox,
    SandboxProvider,
    SandboxState,
    WorkspaceChanges,
)
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.workspace import Workspace, create_workspace, remove_workspace

__all__ = [
    "HOME_SCRATCH",
    "CompletedRun",
    "LazySandbox",
    "LocalSandbox",
    "LocalSandboxProvider",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxProvider",
    "SandboxState",
]

_NOBODY = 65534
# The working directory is the sandbox's HOME, so programs leave their own files there: the engine's
# (.fleet-*), the coding CLIs' (conversations, settings, caches) and shells'. None of them is a
# session's work; as untracked files they are never part of its change (gitignore patterns).
HOME_SCRATCH = (
    "/.fleet-*",
    "/.claude/",
    "/.claude.json",
    "/.claude.json.*",
    "/.codex/",
    "/.aider*",
    "/.cache/",
    "/.config/",
    "/.local/",
    "/.npm/",
    "/.ssh/",
    "/.gitconfig",
    "/.bash_history",
    "/.python_history",
    "/.lesshst",
    "/.wget-hsts",
    "/.viminfo",
)
_DRAIN_GRACE = 2.0  # seconds to collect output after the command's group is killed
# CompletedRun, Sandbox, SandboxProvider and SandboxState are the hands port's; named here too.


class SandboxError(FleetError):
    """A sandbox could not be created or is gone."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxConfig:
    root: Path  # where workspaces live
    use_bwrap: bool | None = None  # None: when available
    run_as: int | None = None  # uid for non-bwrap sandboxes; None: nobody when root, else unchanged
    allow_network: bool = False  # bubblewrap only; without it the host network is shared
    ro_paths: tuple[str, ...] = ()  # extra host paths visible read-only (bubblewrap)
    default_timeout: float = 120.0


class LocalSandbox:
    def __init__(
        self,
        workspace: Workspace,
        resources: ResourceSpec,
        *,
        config: SandboxConfig,
        bwrap: str | None,
        shim: isolation.ExecShim,
        uid: int | None,
        owner: str,
        allow_network: bool,
        clock: Clock,
        changes: WorkspaceChanges | None = None,
        items: Sequence[str] = (),
    ) -> None:
        self.sandbox_id = workspace.sandbox_id
        self.session_id = workspace.session_id
        self.workdir = workspace.workdir
        self.workspace = workspace
        self.resources = resources
        self._config = config
        self._bwrap = bwrap
        self._shim = shim
        self._uid = uid
        self._owner = owner
        self._allow_network = allow_network
        self._clock = clock  # the wall-clock timeout runs on it
        self._changes = changes
        self._items = tuple(items)
        self._state = SandboxState.READY
        self._live_groups: set[int] = set()
        self.runs = 0

    @property
    def state(self) -> SandboxState:
        if self._state is SandboxState.READY and not self.workdir.is_dir():
            self._state = SandboxState.DEAD
        return self._state

    @property
    def isolation(self) -> str:
        return isolation.isolation_note(self._bwrap, self._uid)

    def _argv(self, command: str | Sequence[str]) -> list[str]:
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise SandboxError("empty command")
        if self._bwrap is None:
            return argv
        opts = isolation.BwrapOptions(
            workdir=str(self.workdir), allow_network=self._allow_network, ro_paths=self._config.ro_paths
        )
        return isolation.bwrap_argv(self._bwrap, opts, argv)

    async def run(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = None,
        env_extra: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CompletedRun:
        state = self.state
        if state is not SandboxState.READY:
            raise SandboxError(f"sandbox {self.sandbox_id} is {state}")
        wall = self._config.default_timeout if timeout is None else timeout
        res = self.resources
        prepared = self._prepare(command, wall, env_extra)
        if prepared is None:  # like a shell: a command not on PATH exits 127
            return CompletedRun(exit_code=127, stdout="", stderr="cannot start the command: No such file or directory")
        shim_argv, popen_extra, env = prepared
        started = self._clock.now()
        # Our own pipes, not asyncio's: asyncio's wait() on 3.11 only returns once every pipe is
        # closed, which a background child holding stdout would delay until it dies.
        fds: list[int] = []
        try:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            fds += [out_r, out_w, err_r, err_w]
            in_r = in_w = -1
            if stdin is not None:
                in_r, in_w = os.pipe()
                fds += [in_r, in_w]
            # No preexec_fn (unsafe once the process has threads): the shim sets the limits, the
            # parent-death kill and the user after exec.
            proc = await asyncio.create_subprocess_exec(
                *shim_argv,
                stdin=in_r if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                cwd=str(self.workdir),
                env=env,
                start_new_session=True,
                **popen_extra,
            )
        except OSError as exc:  # like a shell: a command that cannot start exits 127
            for fd in fds:
                os.close(fd)
            return CompletedRun(exit_code=127, stdout="", stderr=f"cannot start the command: {exc.strerror}")
        for fd in (out_w, err_w, in_r):
            if fd >= 0:
                os.close(fd)
        self.runs += 1
        pgid = proc.pid  # start_new_session: the child leads its own group
        self._live_groups.add(pgid)
        out, err = Capture(res.max_output_bytes), Capture(res.max_output_bytes)
        try:
            timed_out = await self._wait(proc, wall, (out_r, out), (err_r, err), (in_w, stdin))
        finally:
            self._live_groups.discard(pgid)
        rc = proc.returncode
        sig: int | None = None
        if rc is not None and rc < 0:
            sig = -rc
        elif self._bwrap is not None and rc is not None and rc > 128:
            sig = rc - 128  # bwrap reports a signalled child as 128 + signal
        return CompletedRun(
            exit_code=None if sig is not None else rc,
            stdout=out.text(),
            stderr=err.text(),
            truncated=out.truncated or err.truncated,
            timed_out=timed_out,
            killed=sig is not None and not timed_out,
            signal=sig,
            duration=self._clock.now() - started,
        )

    def _prepare(
        self, command: str | Sequence[str], wall: float, env_extra: Mapping[str, str] | None
    ) -> tuple[list[str], dict[str, Any], dict[str, str]] | None:
        """The argv behind the exec shim, its extra subprocess arguments and the environment;
        None when the command is not on PATH."""
        res = self.resources
        inside_tmp = "/tmp" if self._bwrap else str(self.workspace.tmpdir)
        try:
            env = isolation.process_env(
                home=str(self.workdir),
                tmpdir=inside_tmp,
                extra=env_extra,
                markers={isolation.OWNER_VAR: self._owner, isolation.SANDBOX_VAR: self.sandbox_id},
            )
        except ValueError as exc:
            raise SandboxError(str(exc)) from None
        # bwrap as root maps the sandbox user to host root, where RLIMIT_NPROC is never enforced;
        # setting it would only limit bwrap's own setup.
        nproc = None if (self._bwrap and os.geteuid() == 0) else res.max_processes
        limits = isolation.ProcessLimits(
            cpu_seconds=res.cpu_seconds(wall), memory=res.effective_limits.memory, fsize=res.max_file_bytes, nproc=nproc
        )
        drop = None if self._bwrap else self._uid  # bwrap maps its own user
        argv = self._argv(command)
        if self._bwrap is None and "/" not in argv[0] and shutil.which(argv[0], path=env["PATH"]) is None:
            return None
        shim_argv, popen_extra = self._shim.prepare(limits, argv, uid=drop)
        return shim_argv, popen_extra, env

    async def _wait(
        self,
        proc: asyncio.subprocess.Process,
        wall: float,
        out: tuple[int, Capture],
        err: tuple[int, Capture],
        feed: tuple[int, bytes | None],
    ) -> bool:
        """Wait for the command (killing its group at the wall timeout), drain its pipes, feed its
        stdin; True when the timeout killed it."""
        timed_out = False
        pgid = proc.pid
        try:
            async with asyncio.TaskGroup() as tg:
                readers = [tg.create_task(read_fd(*out)), tg.create_task(read_fd(*err))]
                if feed[1] is not None:
                    tg.create_task(write_fd(feed[0], feed[1]))
                try:
                    async with clock_timeout(self._clock, wall):
                        await proc.wait()
                except TimeoutError:
                    timed_out = True
                    kill_group(pgid)
                    await proc.wait()
                # The command is done: nothing it started may outlive it.
                kill_group(pgid)
                _done, pending = await asyncio.wait(readers, timeout=_DRAIN_GRACE)
                if pending:  # something left the group and holds the pipes: find it by its marker
                    await asyncio.to_thread(self._kill_marked)
                    _done, pending = await asyncio.wait(readers, timeout=_DRAIN_GRACE)
                for task in pending:
                    task.cancel()
        finally:
            # On the normal path the group was killed right after its leader exited; killing an
            # id again later could hit a recycled process group, so only the abnormal path does.
            if proc.returncode is None:
                kill_group(pgid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        return timed_out

    def _kill_marked(self) -> list[int]:
        return isolation.kill_marked(lambda m: m.get(isolation.SANDBOX_VAR) == self.sandbox_id)

    def kill_processes(self) -> list[int]:
        """Kill every process of this sandbox, including ones that left its process groups."""
        for pgid in list(self._live_groups):
            kill_group(pgid)
        return self._kill_marked()

    async def capture(self, scratch: Sequence[str] = ()) -> dict[str, Any] | None:
        ws, changes = self.workspace, self._changes
        if changes is None or ws.worktree is None or ws.gitdir is None or self.state is not SandboxState.READY:
            return None
        return await asyncio.to_thread(
            changes.capture, ws.worktree, gitdir=ws.gitdir, items=self._items, scratch=(*HOME_SCRATCH, *scratch)
        )

    async def aclose(self) -> None:
        if self._state is SandboxState.CLOSED:
            return
        self._state = SandboxState.CLOSED
        await asyncio.to_thread(self.kill_processes)
        await asyncio.to_thread(remove_workspace, self.workspace.base)

    def __repr__(self) -> str:
        return f"LocalSandbox(id={self.sandbox_id}, session={self.session_id}, state={self.state}, runs={self.runs})"


class LocalSandboxProvider:
    def __init__(self, config: SandboxConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or RealClock()
        self.root = Path(config.root).resolve()
        self.bwrap = isolation.bwrap_path() if config.use_bwrap in (None, True) else None
        if config.use_bwrap is True and self.bwrap is None:
            raise SandboxError("bubblewrap was required but bwrap is not installed or cannot create namespaces")
        if self.bwrap is None:
            self.uid = config.run_as if config.run_as is not None else (_NOBODY if os.geteuid() == 0 else None)
            if self.uid is None:
                # Same user as the engine: at least keep our own environ (with its keys) unreadable.
                isolation.make_parent_undumpable()
        else:
            self.uid = None
        self.owner = isolation.owner_token()
        self.shim = isolation.exec_shim()

    @property
    def isolation(self) -> str:
        return isolation.isolation_note(self.bwrap, self.uid)

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.uid is not None:
            os.chmod(self.root, 0o755)  # the unprivileged user must reach its workspace

    async def provision(
        self,
        resources: ResourceSpec,
        *,
        session_id: str,
        source: Path | None = None,
        items: Sequence[str] = (),
        allow_network: bool | None = None,
        commit: str | None = None,
        patch: bytes | None = None,
        changes: WorkspaceChanges | None = None,
    ) -> LocalSandbox:
        await asyncio.to_thread(self._prepare_root)
        sandbox_id = f"sbx-{secrets.token_hex(6)}"
        chown = (self.uid, self.uid) if self.uid is not None else None
        src = None if source is None else await asyncio.to_thread(Path(source).resolve)
        # git's worktree bookkeeping takes its own per-repository lock (workspace.py)
        try:
            ws = await asyncio.to_thread(
                create_workspace,
                self.root,
                sandbox_id=sandbox_id,
                session_id=session_id,
                owner=self.owner,
                source=src,
                items=items,
                chown=chown,
                commit=commit if commit is not None else (changes.base if changes is not None else None),
                patch=patch,
            )
        except (OSError, ValueError) as exc:
            await asyncio.to_thread(remove_workspace, self.root / sandbox_id)
            raise SandboxError(f"could not create a workspace for {session_id}: {exc}") from None
        except Exception:
            await asyncio.to_thread(remove_workspace, self.root / sandbox_id)
            raise
        net = self.config.allow_network if allow_network is None else allow_network
        return LocalSandbox(
            ws,
            resources,
            config=self.config,
            bwrap=self.bwrap,
            shim=self.shim,
            uid=self.uid,
            owner=self.owner,
            allow_network=net,
            clock=self.clock,
            changes=changes,
            items=items,
        )

    def __repr__(self) -> str:
        return f"LocalSandboxProvider(root={self.root}, bwrap={self.bwrap is not None}, uid={self.uid})"


class LazySandbox:
    """A sandbox that exists only once a tool first needs it; replaced after it dies.

    Invariant: at most one live sandbox per LazySandbox; ``aclose`` releases it and is idempotent.
    """

    def __init__(self, provider: SandboxProvider, resources: ResourceSpec, **options: Unpack[ProvisionOptions]) -> None:
        self._provider = provider
        self._resources = resources
        self._options = options  # each new sandbox is provisioned with them
        self._sandbox: Sandbox | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self.provisioned = 0

    @property
    def current(self) -> Sandbox | None:
        return self._sandbox

    async def get(self) -> Sandbox:
        async with self._lock:
            if self._closed:
                raise SandboxError("the session's hands are closed")
            if self._sandbox is not None and self._sandbox.state is not SandboxState.READY:
                old, self._sandbox = self._sandbox, None
                await old.aclose()
            if self._sandbox is None:
                self._sandbox = await self._provider.provision(self._resources, **self._options)
                self.provisioned += 1
            return self._sandbox

    async def change(self) -> dict[str, Any] | None:
        """What the session changed in its current sandbox (the hands port's ``ChangeSource``)."""
        async with self._lock:
            box = self._sandbox
            if box is None or box.state is not SandboxState.READY:
                return None
            return await box.capture()

    async def discard(self) -> None:
        """Drop the current sandbox (it misbehaved); the next :meth:`get` provisions a new one."""
        async with self._lock:
            old, self._sandbox = self._sandbox, None
        if old is not None:
            await old.aclose()

    async def aclose(self) -> None:
        self._closed = True
        await self.discard()
