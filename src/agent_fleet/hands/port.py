"""The hands port: what agents act through, as the rest of the engine sees it.

* :class:`Hands`: tools are called as ``execute(name, input) -> str``. A tool error is returned to
  the model as text (``ToolOutput.is_error``), never raised into the brain: the model decides whether
  to retry. Hands that keep state a new attempt must rebuild (the edits in a session's workspace) are
  also :class:`Replays`: before the first tool call of an attempt they are given the session's earlier
  successful calls.
* :class:`SandboxProvider` / :class:`Sandbox`: a real process per command in a session's own
  workspace; how a run ended is a :class:`CompletedRun`, never an exception.
* :class:`CliAgent`: an external command agent (``--agent-cmd``) run for one session; what it did is a
  :class:`CliOutcome`. It reaches the gateway through :class:`GatewayAccess` (the session's own token).

A session asks for its sandbox's requests and limits with a :class:`ResourceSpec`; a CLI agent's own
conversation, kept between attempts, is a :class:`CliState` (both named here too).

A run that keeps its sessions' code changes (SPEC.md "Changes") gives its sandboxes a
:class:`WorkspaceChanges`: every worktree starts at its base commit, and when a session ends its
sandbox captures what it changed (``Sandbox.capture``) before the workspace is removed. Hands whose
sandbox may hold such a change are a :class:`ChangeSource`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, Required, TypedDict, Unpack, runtime_checkable

from agent_fleet.domain.model import ToolSpec
from agent_fleet.domain.plan import Partition
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.hands.cli_state import CliState
from agent_fleet.hands.resources import ResourceSpec

__all__ = [
    "ChangeSource",
    "CliAgent",
    "CliOutcome",
    "CliState",
    "CommandOptions",
    "CompletedRun",
    "GatewayAccess",
    "Hands",
    "ProvisionOptions",
    "Replays",
    "ResourceSpec",
    "Sandbox",
    "SandboxProvider",
    "SandboxState",
    "ToolOutput",
    "WorkspaceChanges",
]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    output: str
    is_error: bool = False


class Hands(Protocol):
    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools this session may call (its partition's toolset), besides submit_result/finish."""

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput: ...

    async def aclose(self) -> None:
        """Release whatever was provisioned (sandbox processes, worktrees). Safe to call twice."""


@runtime_checkable
class Replays(Protocol):
    def replay(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """The session's earlier tool calls that succeeded, ``(name, arguments)`` in the order they ran
        (from its log): what they changed is restored before this attempt's first tool call. Called
        once, before any :meth:`Hands.execute`; calls to tools these hands do not replay are ignored."""


@runtime_checkable
class ChangeSource(Protocol):
    """Hands that can say what their session changed in its workspace."""

    async def change(self) -> dict[str, Any] | None:
        """The data of the session's ``change`` event as its workspace is now; None when it has no
        workspace of a repository, or nothing changed."""


class WorkspaceChanges(Protocol):
    """How a run keeps its sessions' changes (implemented by the changes plane, given by the engine)."""

    @property
    def base(self) -> str:
        """The commit every worktree of the run starts from."""

    def capture(
        self, worktree: Path, *, gitdir: Path, items: Sequence[str], scratch: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """The ``change`` event of a session whose worktree top is ``worktree`` (its git directory
        ``gitdir``): ``items`` are its partition's paths, ``scratch`` patterns of the sandbox's own
        files, both relative to the input directory. Blocking (git runs); None when nothing changed."""


class SandboxState(StrEnum):
    READY = "ready"
    DEAD = "dead"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class CompletedRun:
    exit_code: int | None  # None when the process was killed by a signal
    stdout: str
    stderr: str
    truncated: bool = False  # output past the cap was dropped
    timed_out: bool = False  # the wall-clock timeout killed it
    killed: bool = False  # something else killed it (signal, OOM, the sandbox dying)
    signal: int | None = None
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.killed

    def describe(self) -> str:
        """The run as text for the model: output plus one line on how it ended."""
        parts = [self.stdout]
        if self.stderr:
            parts.append(f"[stderr]\n{self.stderr}")
        if self.truncated:
            parts.append("[output truncated]")
        if self.timed_out:
            parts.append(f"[timed out after {self.duration:.0f} s; the process group was killed]")
        elif self.killed:
            parts.append(f"[killed by signal {self.signal}; the sandbox may be replaced, retry the command]")
        else:
            parts.append(f"[exit code {self.exit_code}]")
        return "\n".join(p for p in parts if p)


class CommandOptions(TypedDict, total=False):
    """How :meth:`Sandbox.run` runs a command (each optional): the keywords an implementation takes,
    and a wrapper passes on as they came."""

    timeout: float | None  # wall-clock seconds; default: the sandbox's own
    env_extra: Mapping[str, str] | None  # added to the sandbox's environment
    stdin: bytes | None  # the command's standard input; default none


class Sandbox(Protocol):
    sandbox_id: str
    session_id: str
    workdir: Path

    @property
    def state(self) -> SandboxState: ...

    async def run(self, command: str | Sequence[str], **options: Unpack[CommandOptions]) -> CompletedRun: ...

    def kill_processes(self) -> list[int]:
        """Kill every process of this sandbox now, as when its host dies; returns their pids."""

    async def capture(self, scratch: Sequence[str] = ()) -> dict[str, Any] | None:
        """The ``change`` event of the workspace as it is now (:class:`WorkspaceChanges`); None when
        the run keeps no changes, the workspace is no worktree, or nothing changed. ``scratch``:
        more files of the command's own, not its work (patterns relative to the working directory)."""

    async def aclose(self) -> None: ...


class ProvisionOptions(TypedDict, total=False):
    """What :meth:`SandboxProvider.provision` is told besides the resources (all but ``session_id``
    optional): the keywords an implementation takes, and a wrapper passes on as they came."""

    session_id: Required[str]
    source: Path | None  # a git repository (the workspace is a worktree of it) or a directory; default none
    items: Sequence[str]  # paths relative to a ``source`` directory, copied into the workspace
    allow_network: bool | None  # default: as the provider is configured
    changes: WorkspaceChanges | None  # the run keeps its changes: a worktree of its base; default none
    commit: str | None  # a git ``source``: the commit its worktree is of; default HEAD
    patch: bytes | None  # a git ``source``: a patch (``git diff --binary``) applied to the worktree


class SandboxProvider(Protocol):
    async def provision(self, resources: ResourceSpec, **options: Unpack[ProvisionOptions]) -> Sandbox: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayAccess:
    """How a CLI agent reaches the gateway: base URLs and the session's own token."""

    openai_base_url: str
    anthropic_base_url: str
    token: str

    def __repr__(self) -> str:
        return f"GatewayAccess(openai={self.openai_base_url!r}, anthropic={self.anthropic_base_url!r}, token=***)"


@dataclass(frozen=True, slots=True)
class CliOutcome:
    session_id: str
    partition_id: str
    items: tuple[ResultItem, ...]
    usage: Usage
    cost_usd: Decimal | None  # as the CLI reported it (the gateway's meter is authoritative)
    exit_code: int | None
    timed_out: bool
    killed: bool
    error: str | None
    stderr_tail: str
    duration: float
    cli_session_id: str | None = None  # the tool's own conversation id
    state: CliState | None = None  # the tool's conversation files as the run left them
    stopped: bool = False  # stopped after a budget refusal
    auth_failed: bool = False  # the tool reported a refused credential (another attempt cannot fix it)
    change: dict[str, Any] | None = None  # what the run changed in its worktree (the ``change`` event)

    @property
    def ok(self) -> bool:
        return self.error is None


class CliAgent(Protocol):
    """An external command agent: one run per attempt, in a fresh sandbox of the session's own.

    Never raises for what the command does (a non-zero exit, garbage output, a hang): that is in the
    outcome. Raises :class:`~agent_fleet.hands.sandbox.SandboxError` only if no sandbox could be made.
    """

    async def run(
        self,
        *,
        session_id: str,
        partition: Partition,
        task: str,
        gateway: GatewayAccess,
        resume: CliState | None = None,
        stop: asyncio.Event | None = None,
        keep: Callable[[CliState], None] | None = None,
    ) -> CliOutcome:
        """With ``resume`` (what an earlier attempt left) the tool continues its conversation; once
        ``stop`` is set (the gateway refused a call on budget) the command is stopped; if the attempt
        is cancelled, ``keep`` gets the conversation as the command left it."""
