"""The built-in agent's file tools in a run that makes changes: reads and edits in its own worktree.

Where the run makes changes (a directory input in a git repository, SPEC.md "Changes"), a session's
``read_file``, ``list_files`` and ``grep`` read its own workspace — the git worktree its sandbox
holds, created on the first tool call that needs it — and ``write_file`` / ``edit_file`` change it;
the user's checkout is never read from or written to by these tools. Scope is the partition's paths
for reads and writes alike: any other path, ``..``, an absolute path, a symbolic link (on the way or
the file itself) is an error returned to the model, never a read or a write
(:mod:`~agent_fleet.hands.workspace_io`). Binary files and files over the size limit are refused with
the reason; ``edit_file`` replaces exactly one occurrence of ``old`` (none or several: an error, the
file untouched).

Edits survive a new workspace: the edits this session made (and, after a resume, those its log holds,
given to :meth:`WorkspaceFiles.replay`) are applied again, in order, to a workspace that replaced one
that died, and to the workspace of a new attempt before its change is read
(:meth:`WorkspaceFiles.change`). Effects of ``run`` commands are not replayed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.hands.files import FILE_TOOL_SPECS, FileTools
from agent_fleet.hands.port import Sandbox, ToolOutput
from agent_fleet.hands.sandbox import LazySandbox, SandboxError
from agent_fleet.hands.workspace_io import (
    MAX_EDIT_BYTES,
    WorkspaceIOError,
    check_relative,
    decode_text,
    read_bytes,
    write_bytes,
)

__all__ = ["EDIT_TOOL_SPECS", "WRITE_TOOLS", "WorkspaceFiles"]

_MAX_READ_BYTES = 200_000
_MAX_GREP_LINES = 200

EDIT_TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "write_file",
        "Replace the whole content of one file of your partition (or create it again). Returns what was written.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "path relative to the input root"},
                "content": {"type": "string", "description": "the file's complete new text"},
            },
            "required": ["path", "content"],
        },
    ),
    ToolSpec(
        "edit_file",
        "Replace the one exact occurrence of `old` in a file of your partition with `new`. `old` must occur "
        "exactly once (include surrounding lines to make it unique); otherwise nothing is changed and an "
        "error says how many occurrences there were.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "path relative to the input root"},
                "old": {"type": "string", "description": "the exact text to replace, whitespace included"},
                "new": {"type": "string", "description": "the text to put in its place"},
            },
            "required": ["path", "old", "new"],
        },
    ),
)
WRITE_TOOLS = frozenset(s.name for s in EDIT_TOOL_SPECS)


class WorkspaceFiles(FileTools):
    """Invariant: every read and write resolves inside the current sandbox's ``workdir``, and only for
    one of the partition's paths."""

    def __init__(self, sandbox: LazySandbox, paths: tuple[str, ...], *, writable: bool = True) -> None:
        super().__init__(paths)
        self._sandbox = sandbox
        self._writable = writable
        self._lock = asyncio.Lock()  # one file operation at a time: an edit reads, then writes
        self._box: Sandbox | None = None  # the sandbox the edits below were applied to
        self._edits: list[tuple[str, dict[str, str]]] = []  # successful writes, in order
        self._provisioning = asyncio.Lock()  # one workspace brought up to date at a time

    def specs(self) -> tuple[ToolSpec, ...]:
        return FILE_TOOL_SPECS + EDIT_TOOL_SPECS if self._writable else FILE_TOOL_SPECS

    async def aclose(self) -> None:
        await self._sandbox.aclose()

    def replay(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Writes a previous attempt of this session made (from its log, in order): applied to the
        workspace before anything else touches it. Once a workspace exists it already holds them, and
        the call changes nothing."""
        if self._box is not None or self._edits:
            return
        edits = []
        for name, args in calls:
            call = self._call(name, args) if name in WRITE_TOOLS else None
            if isinstance(call, dict):
                edits.append((name, call))
        self._edits[:0] = edits

    @property
    def edits(self) -> int:
        """How many writes this session's workspace holds (replayed ones included)."""
        return len(self._edits)

    async def workdir(self) -> Path:
        """The workspace's root, provisioned (and brought up to date with the session's edits) if need be."""
        return (await self.sandbox()).workdir

    async def sandbox(self) -> Sandbox:
        """The session's sandbox, provisioned (and brought up to date with the session's edits) if need be."""
        async with self._provisioning:
            return await self._current()

    async def _current(self) -> Sandbox:
        box = await self._sandbox.get()
        if box is not self._box:
            # A new workspace (the first one, or one replacing a sandbox that died): it starts from the
            # base, so every edit the session made is applied to it again.
            for name, args in self._edits:
                try:
                    await asyncio.to_thread(self._apply, box.workdir, name, args)
                except (WorkspaceIOError, OSError):
                    continue  # it applied to a state a command made, which is not replayed
            self._box = box
        return box

    async def change(self) -> dict[str, Any] | None:
        """What the session changed in its workspace (the hands port's ``ChangeSource``): a session
        holding edits — its own or replayed from its log — gets its workspace made (and brought up
        to date) first, so an attempt that ends without a tool call of its own loses none of them."""
        if self._edits:
            try:
                await self.sandbox()
            except SandboxError:
                return None
        return await self._sandbox.change()

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        if name in WRITE_TOOLS and self._writable:
            return await self._write(name, input)
        return await super().execute(name, input)

    def _in_scope(self, rel: str) -> str | None:
        norm = rel.strip().removeprefix("./")
        return norm if norm in self._allowed else None

    async def _root(self) -> Path | ToolOutput:
        try:
            return await self.workdir()
        except SandboxError as exc:
            await self._sandbox.discard()
            return ToolOutput(f"error: the workspace is gone ({exc}); a new one is made on the next call, retry", True)

    async def read(self, rel: str) -> ToolOutput:
        norm = self._in_scope(rel)
        if norm is None:
            return ToolOutput(f"error: {rel!r} is not in this partition", is_error=True)
        async with self._lock:
            root = await self._root()
            if isinstance(root, ToolOutput):
                return root
            try:
                data, size = await asyncio.to_thread(read_bytes, root, norm, limit=_MAX_READ_BYTES)
                text = _text_prefix(norm, data, truncated=size > len(data))
            except WorkspaceIOError as exc:
                return ToolOutput(f"error: {exc}", is_error=True)
            except OSError as exc:
                return ToolOutput(f"error: cannot read {rel!r}: {exc.strerror or exc}", is_error=True)
        if size > len(data):
            text += f"\n[truncated: the file has {size} bytes, {len(data)} shown]"
        return ToolOutput(text)

    async def grep(self, pattern: str) -> ToolOutput:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            return ToolOutput(f"error: bad pattern: {exc}", is_error=True)
        async with self._lock:
            root = await self._root()
            if isinstance(root, ToolOutput):
                return root
            out = await asyncio.to_thread(self._grep, root, rx)
        return ToolOutput("\n".join(out) if out else "no matches")

    def _grep(self, root: Path, rx: re.Pattern[str]) -> list[str]:
        out: list[str] = []
        for rel in self._paths:
            try:
                data, size = read_bytes(root, rel, limit=MAX_EDIT_BYTES)
                text = _text_prefix(rel, data, truncated=size > len(data))
            except (WorkspaceIOError, OSError):
                continue  # binary, unreadable or gone: not searched
            for no, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    out.append(f"{rel}:{no}: {line.strip()[:300]}")
                    if len(out) >= _MAX_GREP_LINES:
                        out.append(f"[stopped after {_MAX_GREP_LINES} matches]")
                        return out
        return out

    def _call(self, name: str, args: dict[str, Any]) -> dict[str, str] | ToolOutput:
        """A write's arguments with its path normalised, or the error the model gets."""
        path = args.get("path")
        if not isinstance(path, str):
            return ToolOutput(f"error: {name} needs a string 'path'", is_error=True)
        norm = self._in_scope(path)
        if norm is None:
            return ToolOutput(f"error: {path!r} is not in this partition; only its own files can be written", True)
        fields = ("content",) if name == "write_file" else ("old", "new")
        for f in fields:
            if not isinstance(args.get(f), str):
                return ToolOutput(f"error: {name} needs a string {f!r}", is_error=True)
        return {"path": norm, **{f: args[f] for f in fields}}

    async def _write(self, name: str, args: dict[str, Any]) -> ToolOutput:
        call = self._call(name, args)
        if isinstance(call, ToolOutput):
            return call
        path = call["path"]
        async with self._lock:
            root = await self._root()
            if isinstance(root, ToolOutput):
                return root
            try:
                said = await asyncio.to_thread(self._apply, root, name, call)
            except WorkspaceIOError as exc:
                return ToolOutput(f"error: {exc}", is_error=True)
            except OSError as exc:
                return ToolOutput(f"error: cannot write {path!r}: {exc.strerror or exc}", is_error=True)
            self._edits.append((name, call))
        return ToolOutput(said)

    @staticmethod
    def _apply(root: Path, name: str, args: dict[str, str]) -> str:
        """Apply one write to the workspace at ``root``; what happened, as text for the model."""
        rel = check_relative(str(args.get("path", "")))
        if name == "write_file":
            data = str(args.get("content", "")).encode("utf-8")
            created = write_bytes(root, rel, data)
            return f"{'created' if created else 'wrote'} {rel} ({len(data)} bytes)"
        old, new = str(args.get("old", "")), str(args.get("new", ""))
        if not old:
            raise WorkspaceIOError("'old' is empty; give the exact text to replace")
        if old == new:
            raise WorkspaceIOError("'old' and 'new' are the same; nothing would change")
        data, size = read_bytes(root, rel, limit=MAX_EDIT_BYTES + 1)
        if size > MAX_EDIT_BYTES:
            raise WorkspaceIOError(f"{rel!r} has {size} bytes, over the {MAX_EDIT_BYTES}-byte limit of edit_file")
        text = decode_text(rel, data)
        first = text.find(old)
        if first < 0:
            raise WorkspaceIOError(f"'old' does not occur in {rel}; nothing was changed (read the file again)")
        second = text.find(old, first + 1)
        if second >= 0:
            n = _occurrences(text, old)
            raise WorkspaceIOError(
                f"'old' occurs {n} times in {rel}; nothing was changed (add surrounding text to make it unique)"
            )
        write_bytes(root, rel, (text[:first] + new + text[first + len(old) :]).encode("utf-8"))
        line = text.count("\n", 0, first) + 1
        return f"replaced 1 occurrence in {rel} at line {line}"


def _occurrences(text: str, sub: str) -> int:
    """Occurrences of ``sub`` in ``text``, overlapping ones counted."""
    n, at = 0, text.find(sub)
    while at >= 0:
        n += 1
        at = text.find(sub, at + 1)
    return n


def _text_prefix(rel: str, data: bytes, *, truncated: bool) -> str:
    """``data`` (a file, or its first bytes when ``truncated``) as text; binary is refused."""
    if truncated:
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut > 0 else data
        try:
            return decode_text(rel, data)
        except WorkspaceIOError:
            if b"\x00" in data:
                raise
            return data.decode("utf-8", errors="ignore")  # a long line cut mid-character
    return decode_text(rel, data)
