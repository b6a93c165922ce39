"""Per-partition hands: the minimal toolset a partition needs, assembled from the hands there are.

Defaults by input kind: a directory partition gets the scoped file tools and, when a sandbox
provider is configured, ``run_command`` in a lazily created sandbox; a list partition whose items
are URLs gets ``fetch_url`` limited to those URLs. A partition whose plan names its tools
(``Partition.tools``) gets exactly those: built-in tool names select the matching hands, and any
other name is an MCP toolset (``server`` or ``server__tool``) served by the shared pool.

With ``files_in_sandbox`` the file tools read inside the session's sandbox (one lazily created
sandbox per session, shared with ``run_command``) instead of the input directory.

With ``edits`` (the run keeps changes: a directory input inside a git repository, SPEC.md "Changes";
the engine sets it where it gives the run's ``changes``) a directory partition's file tools act in the
session's own worktree instead, whatever ``files_in_sandbox`` says — ``read_file``, ``list_files``,
``grep`` and also ``write_file`` / ``edit_file``, scoped to the partition's paths
(:mod:`~agent_fleet.hands.workspace_files`) — and it gets ``run``, a shell in that same sandbox. The
user's checkout is then never read or written by a tool, and the session's change is read through
the file tools (which first bring a new attempt's worktree up to date with the session's edits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import ConfigError
from agent_fleet.hands.composite import CompositeHands
from agent_fleet.hands.files import FILE_TOOL_SPECS, PartitionFiles
from agent_fleet.hands.mcp_pool import McpPool
from agent_fleet.hands.port import Hands, WorkspaceChanges
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LazySandbox, SandboxProvider
from agent_fleet.hands.sandbox_files import SandboxFiles
from agent_fleet.hands.shell import RUN, RUN_COMMAND, SandboxHands
from agent_fleet.hands.web import FETCH_URL, EgressPolicy, WebHands, is_url
from agent_fleet.hands.workspace_files import WRITE_TOOLS, WorkspaceFiles

__all__ = ["Toolbox"]

_FILE_TOOLS = frozenset(s.name for s in FILE_TOOL_SPECS)
_BUILTIN = _FILE_TOOLS | WRITE_TOOLS | {RUN_COMMAND.name, RUN.name, FETCH_URL.name}


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolbox:
    """What the engine hands each session. ``hands_for`` fits ``Dispatcher(hands_for=...)``."""

    run_id: str
    input_root: Path | None = None
    sandboxes: SandboxProvider | None = None
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    mcp: McpPool | None = None
    shell: bool = True  # offer run_command to directory partitions by default
    files_in_sandbox: bool = False  # file tools run inside the session's sandbox
    edits: bool = False  # the run makes changes: file tools in the session's worktree, writes, run
    command_timeout: float = 300.0  # the longest a run / run_command command may take, in seconds
    changes: WorkspaceChanges | None = None  # the run keeps its sessions' changes (worktrees of its base)

    def wanted(self, partition: Partition) -> frozenset[str]:
        if partition.tools:
            return frozenset(partition.tools)
        names: set[str] = set()
        if partition.kind is InputKind.DIRECTORY:
            names |= _FILE_TOOLS
            if self.edits:  # run takes the place of the default run_command
                names |= WRITE_TOOLS | {RUN.name}
            elif self.shell and self.sandboxes is not None:
                names.add(RUN_COMMAND.name)
        elif partition.kind is InputKind.LIST and partition.items and all(is_url(i) for i in partition.items):
            names.add(FETCH_URL.name)
        return frozenset(names)

    def hands_for(self, partition: Partition) -> Hands:
        names = self.wanted(partition)
        parts: list[Hands] = []
        lazy: LazySandbox | None = None

        def sandbox() -> LazySandbox:
            nonlocal lazy
            if self.sandboxes is None:
                raise ConfigError(f"partition {partition.id}: {sorted(names)} need a sandbox provider")
            if lazy is None:
                source = self.input_root if partition.kind is InputKind.DIRECTORY else None
                lazy = LazySandbox(
                    self.sandboxes,
                    self.resources,
                    session_id=session_id_for(self.run_id, partition.index),
                    source=source,
                    items=partition.items if source is not None else (),
                    changes=self.changes if source is not None else None,
                )
            return lazy

        files: WorkspaceFiles | None = None
        if names & (_FILE_TOOLS | WRITE_TOOLS):
            if self.input_root is None or partition.kind is not InputKind.DIRECTORY:
                raise ConfigError(f"partition {partition.id}: file tools need a directory input")
            if self.edits:
                files = WorkspaceFiles(sandbox(), partition.items, writable=bool(names & WRITE_TOOLS))
                parts.append(files)
            elif names & WRITE_TOOLS:
                wanted = ", ".join(sorted(names & WRITE_TOOLS))
                raise ConfigError(f"partition {partition.id}: {wanted} need a directory input in a git repository")
            elif self.files_in_sandbox:
                parts.append(SandboxFiles(sandbox(), partition.items))
            else:
                parts.append(PartitionFiles(self.input_root, partition.items))
        for spec in (RUN_COMMAND, RUN):
            if spec.name in names:
                # commands run where the edits are: a replaced sandbox gets them back first
                acquire = files.sandbox if files is not None else None
                parts.append(SandboxHands(sandbox(), spec=spec, max_timeout=self.command_timeout, acquire=acquire))
        if FETCH_URL.name in names:
            parts.append(WebHands(partition.items, self.egress))
        mcp_names = sorted(names - _BUILTIN)
        if mcp_names:
            if self.mcp is None:
                raise ConfigError(f"partition {partition.id} asks for MCP tools {mcp_names}, but none are configured")
            parts.append(self.mcp.toolset(mcp_names))
        # the change is read through the file tools where they keep edits: a workspace that is not
        # there yet (a new attempt that made no call) is made with the session's edits first
        return CompositeHands(*parts, changes=files if files is not None else lazy)
