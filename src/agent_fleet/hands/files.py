"""Scoped file tools for directory partitions: ``read_file``, ``list_files``, ``grep``.

Scope is exclusive: a session sees only its partition's files. A path outside the partition is a
tool error returned to the model, never a read. Paths are resolved against the input root and
re-checked after resolution, so ``..`` and symlinks cannot escape.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.hands.port import ToolOutput

__all__ = ["FILE_TOOL_SPECS", "FileTools", "PartitionFiles"]

_MAX_READ_CHARS = 200_000
_MAX_GREP_LINES = 200

FILE_TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "Read one file of your partition. Returns its text.",
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "path relative to the input root"}},
            "required": ["path"],
        },
    ),
    ToolSpec("list_files", "List the files of your partition.", {"type": "object", "properties": {}}),
    ToolSpec(
        "grep",
        "Search your partition's files with a regular expression; returns matching lines as path:line: text.",
        {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
    ),
)


class FileTools(ABC):
    """The file tools' contract over a partition's paths; subclasses say how a read and a grep run."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        self._paths = tuple(paths)
        self._allowed = frozenset(paths)

    def specs(self) -> tuple[ToolSpec, ...]:
        return FILE_TOOL_SPECS

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        if name == "list_files":
            return ToolOutput("\n".join(self._paths))
        if name == "read_file":
            path = input.get("path")
            if not isinstance(path, str):
                return ToolOutput("error: read_file needs a string 'path'", is_error=True)
            return await self.read(path)
        if name == "grep":
            pattern = input.get("pattern")
            if not isinstance(pattern, str):
                return ToolOutput("error: grep needs a string 'pattern'", is_error=True)
            return await self.grep(pattern)
        return ToolOutput(f"error: unknown tool {name!r}", is_error=True)

    @abstractmethod
    async def read(self, rel: str) -> ToolOutput: ...

    @abstractmethod
    async def grep(self, pattern: str) -> ToolOutput: ...


class PartitionFiles(FileTools):
    """Hands over the files of one directory partition (read-only, no sandbox needed)."""

    def __init__(self, root: str | Path, paths: tuple[str, ...]) -> None:
        super().__init__(paths)
        self._root = Path(root).resolve()

    async def read(self, rel: str) -> ToolOutput:
        return await asyncio.to_thread(self._read, rel)

    async def grep(self, pattern: str) -> ToolOutput:
        return await asyncio.to_thread(self._grep, pattern)

    async def aclose(self) -> None:
        return None

    def _resolve(self, rel: str) -> Path | None:
        norm = rel.strip().removeprefix("./")
        if norm not in self._allowed:
            return None
        full = (self._root / norm).resolve()
        if not full.is_relative_to(self._root):
            return None
        return full

    def _read(self, rel: str) -> ToolOutput:
        full = self._resolve(rel)
        if full is None:
            return ToolOutput(f"error: {rel!r} is not in this partition", is_error=True)
        try:
            text = full.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return ToolOutput(f"error: cannot read {rel!r}: {exc.strerror or exc}", is_error=True)
        if len(text) > _MAX_READ_CHARS:
            text = text[:_MAX_READ_CHARS] + f"\n[truncated at {_MAX_READ_CHARS} characters]"
        return ToolOutput(text)

    def _grep(self, pattern: str) -> ToolOutput:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            return ToolOutput(f"error: bad pattern: {exc}", is_error=True)
        out: list[str] = []
        for rel in self._paths:
            full = self._resolve(rel)
            if full is None:
                continue
            try:
                lines = full.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for no, line in enumerate(lines, 1):
                if rx.search(line):
                    out.append(f"{rel}:{no}: {line.strip()[:300]}")
                    if len(out) >= _MAX_GREP_LINES:
                        out.append(f"[stopped after {_MAX_GREP_LINES} matches]")
                        return ToolOutput("\n".join(out))
        return ToolOutput("\n".join(out) if out else "no matches")
