"""Sandbox workspaces on disk and the marker that lets the reaper clean them up.

Layout under the provider's root::

    <root>/<sandbox_id>/sandbox.json   marker: session, owner, worktree origin
    <root>/<sandbox_id>/work/          the working directory (a git worktree or a plain directory)
    <root>/<sandbox_id>/tmp/           TMPDIR when bubblewrap is not there to give a private /tmp

The marker is written before anything else is created and removed last, so a crash at any point
leaves something the reaper recognises.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "Workspace", "create_workspace", "git_toplevel", "remove_workspace"]

MARKER = "sandbox.json"


@dataclass(frozen=True, slots=True)
class Workspace:
    sandbox_id: str
    session_id: str
    base: Path  # <root>/<sandbox_id>
    workdir: Path
    tmpdir: Path
    worktree_of: Path | None  # the repository a worktree was added to

    def marker(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.base / MARKER).read_text())
        return data


def git_toplevel(path: Path) -> Path | None:
    """The repository root when ``path`` is the top of a git work tree with at least one commit."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel", "--verify", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    top = Path(out.stdout.splitlines()[0]).resolve()
    return top if top == path.resolve() else None


def _write_marker(base: Path, data: dict[str, Any]) -> None:
    tmp = base / (MARKER + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, base / MARKER)


def create_workspace(
    root: Path,
    *,
    sandbox_id: str,
    session_id: str,
    owner: str,
    source: Path | None = None,
    items: Sequence[str] = (),
    chown: tuple[int, int] | None = None,
) -> Workspace:
    """Create the workspace: a worktree when ``source`` is a git repository, else a plain directory
    holding copies of ``items`` (paths relative to ``source``), so a session sees only its own files.
    """
    base = root / sandbox_id
    base.mkdir(parents=True, exist_ok=False)
    marker: dict[str, Any] = {
        "sandbox_id": sandbox_id,
        "session_id": session_id,
        "owner": owner,
        "worktree_of": None,
    }
    _write_marker(base, marker)
    workdir, tmpdir = base / "work", base / "tmp"
    tmpdir.mkdir()
    repo = git_toplevel(source) if source is not None else None
    if repo is not None:
        marker["worktree_of"] = str(repo)
        _write_marker(base, marker)  # before the worktree exists: a crash in between is still reaped
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(workdir), "HEAD"],
            capture_output=True,
            timeout=300,
            check=True,
        )
    else:
        workdir.mkdir()
        if source is not None:
            src_root = source.resolve()
            for rel in items:
                src = (src_root / rel).resolve()
                if not src.is_relative_to(src_root) or not src.is_file():
                    continue
                dst = workdir / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
    if chown is not None:
        for p in (base, tmpdir, workdir):
            os.chown(p, *chown)
        for dirpath, dirnames, filenames in os.walk(workdir):
            for name in (*dirnames, *filenames):
                with contextlib.suppress(OSError):
                    os.chown(os.path.join(dirpath, name), *chown, follow_symlinks=False)
    return Workspace(sandbox_id, session_id, base, workdir, tmpdir, repo)


def remove_workspace(base: Path) -> bool:
    """Remove a workspace (and its git worktree registration). Safe on half-created ones."""
    if not base.exists():
        return False
    try:
        marker = json.loads((base / MARKER).read_text())
    except (OSError, ValueError):
        marker = {}
    repo = marker.get("worktree_of")
    workdir = base / "work"
    if repo:
        subprocess.run(
            ["git", "-C", repo, "worktree", "remove", "--force", str(workdir)],
            capture_output=True,
            timeout=120,
            check=False,
        )
    # rmtree tolerates what git already removed; the marker goes last
    for child in sorted(base.iterdir(), key=lambda p: p.name == MARKER):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                child.unlink()
    with contextlib.suppress(OSError):
        base.rmdir()
    if repo:
        subprocess.run(["git", "-C", repo, "worktree", "prune"], capture_output=True, timeout=120, check=False)
    return not base.exists()
