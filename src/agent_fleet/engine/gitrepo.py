"""The git repository a directory input lives in, read with git itself (off the event loop)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["InputRepo", "input_repo"]


@dataclass(frozen=True, slots=True)
class InputRepo:
    top: Path  # the repository's top level
    subdir: str  # the input's directory relative to it ("" for the top level)
    head: str  # the commit HEAD names now


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def input_repo(path: str | os.PathLike[str] | None) -> InputRepo | None:
    """The repository a directory input is in (with at least one commit), or None: not a directory,
    not in a repository, or a repository without a commit yet. Runs git: call it off the event loop."""
    if path is None:
        return None
    where = Path(path)
    if not where.is_dir():
        return None
    top = _git(where, "rev-parse", "--show-toplevel")
    head = _git(where, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if not top or not head:
        return None
    top_path = Path(top).resolve()
    rel = where.resolve().relative_to(top_path).as_posix()
    return InputRepo(top=top_path, subdir="" if rel == "." else rel, head=head)
