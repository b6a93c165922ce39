"""A CLI agent's own conversation, kept between attempts so a paused or preempted agent is continued.

When an attempt ends without completing (paused on budget, preempted, timed out, failed), the files
the tool keeps its conversation in (:func:`~agent_fleet.hands.cli_formats.own_files`: Claude Code's
transcript, Codex's rollout, aider's chat history) are read from the workspace into a
:class:`CliState`; the session log records it as a ``cli_state`` event, with the tool's own session id.
The next attempt writes them back into its new workspace (as the sandbox's user) and runs the command continued:

* ``claude``: ``--resume SESSION_ID`` (the transcript moves to the new workspace's project directory,
  which Claude Code names after the working directory);
* ``codex``: ``exec resume SESSION_ID`` in place of ``exec``;
* ``aider``: ``--restore-chat-history`` (the history file is back in the workspace).

``{resume}`` in the command marks where those arguments go (it is empty on a first attempt); without
it they are appended (``codex``: put after the ``exec`` word). A ``jsonl`` command is run again as it is.
"""

from __future__ import annotations

import base64
import re
import shlex
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.hands.cli_formats import own_files

__all__ = ["MAX_STATE_BYTES", "CliState", "read_own_files", "resume_arguments", "resumed_command"]

MAX_STATE_BYTES = 8 * 1024 * 1024  # what one snapshot keeps at most (uncompressed)
_MAX_FILE_BYTES = 4 * 1024 * 1024
_PLACEHOLDER = "{resume}"


def read_own_files(fmt: str, home: Path, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The tool's own files (and ``extra`` paths) under ``home``, by relative path. Newest first
    within the size cap; unreadable or oversized files are skipped."""
    paths: dict[str, Path] = {}
    for pattern in own_files(fmt):
        for p in home.glob(pattern):
            if p.is_file() and not p.is_symlink():
                paths[p.relative_to(home).as_posix()] = p
    for rel in extra:
        p = home / rel
        if p.resolve().is_relative_to(home.resolve()) and p.is_file():
            paths[rel] = p
    out: dict[str, str] = {}
    total = 0
    for rel, p in sorted(paths.items(), key=lambda kv: -_mtime(kv[1])):
        try:
            size = p.stat().st_size
            if size > _MAX_FILE_BYTES or total + size > MAX_STATE_BYTES:
                continue
            out[rel] = p.read_text(errors="replace")
        except OSError:
            continue
        total += size
    return out


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _claude_dir(workdir: str) -> str:
    """The directory name Claude Code keeps a working directory's sessions under."""
    return re.sub(r"[^A-Za-z0-9]", "-", workdir)


@dataclass(frozen=True, slots=True)
class CliState:
    """The tool's conversation files (relative to its home) and its session id, where it ran."""

    format: str
    cli_session_id: str | None
    workdir: str
    files: dict[str, str]

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.files.values())

    def to_dict(self) -> dict[str, Any]:
        packed = {k: base64.b64encode(zlib.compress(v.encode(), 6)).decode() for k, v in self.files.items()}
        return {
            "format": self.format,
            "cli_session_id": self.cli_session_id,
            "workdir": self.workdir,
            "files": packed,
            "bytes": self.size,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CliState:
        files = {str(k): zlib.decompress(base64.b64decode(v)).decode() for k, v in (data.get("files") or {}).items()}
        sid = data.get("cli_session_id")
        return cls(str(data.get("format", "")), str(sid) if sid else None, str(data.get("workdir", "")), files)

    def relocated(self, home: Path) -> dict[str, str]:
        """The files as they go into a new workspace ``home`` (relative paths): Claude Code's project
        directory is renamed after the new working directory; nothing lands outside ``home``."""
        out: dict[str, str] = {}
        old_dir, new_dir = _claude_dir(self.workdir), _claude_dir(str(home))
        for rel, text in self.files.items():
            parts = rel.split("/")
            if self.format == "claude" and len(parts) == 4 and parts[:3] == [".claude", "projects", old_dir]:
                parts[2] = new_dir
            if any(p in ("", ".", "..") for p in parts) or rel.startswith("/"):
                continue
            out["/".join(parts)] = text
        return out


def resume_arguments(fmt: str, cli_session_id: str | None) -> str:
    """The arguments that continue ``fmt``'s conversation (empty when it cannot be continued)."""
    if fmt == "claude" and cli_session_id:
        return f"--resume {shlex.quote(cli_session_id)}"
    if fmt == "codex" and cli_session_id:
        return f"resume {shlex.quote(cli_session_id)}"
    if fmt == "aider" and cli_session_id:
        return "--restore-chat-history"
    return ""


def resumed_command(command: str, fmt: str, state: CliState | None) -> str:
    """``command`` with ``{resume}`` filled in, or the continue arguments put where the tool wants them."""
    args = resume_arguments(fmt, state.cli_session_id) if state is not None else ""
    if _PLACEHOLDER in command:
        return command.replace(_PLACEHOLDER, args)
    if not args:
        return command
    if fmt == "codex":
        replaced, n = re.subn(r"(^|\s)exec(\s|$)", lambda m: f"{m.group(1)}exec {args}{m.group(2)}", command, count=1)
        return replaced if n else f"{command} {args}"
    return f"{command} {args}"
