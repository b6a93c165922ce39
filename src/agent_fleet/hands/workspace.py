"""Sandbox workspaces on disk and the marker that lets the reaper clean them up.

Layout under the provider's root::

    <root>/<sandbox_id>/sandbox.json   marker: session, owner, worktree origin
    <root>/<sandbox_id>/work/          a git worktree (the working directory is the input's place in
                                       it) or a plain directory (the working directory)
    <root>/<sandbox_id>/tmp/           TMPDIR when bubblewrap is not there to give a private /tmp

The marker is written before anything else is created and removed last, so a crash at any point
leaves something the reaper recognises. For a worktree it also records the worktree's git
directory as git made it, before any command ran in the workspace: the engine reads the session's
change through that directory, never through a ``.git`` file the session could have rewritten.

A worktree is made of ``commit`` when one is given (a run that keeps its sessions' changes: the
input may then be any directory inside the repository), else of ``HEAD`` for an input that is the
top of its repository; any other input gets a plain directory holding copies of its items.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "Workspace", "create_workspace", "git_location", "git_toplevel", "remove_workspace"]

MARKER = "sandbox.json"


@dataclass(frozen=True, slots=True)
class Workspace:
    sandbox_id: str
    session_id: str
    base: Path  # <root>/<sandbox_id>
    workdir: Path
    tmpdir: Path
    worktree_of: Path | None  # the repository a worktree was added to
    worktree: Path | None = None  # the worktree's top (the working directory is in it)
    gitdir: Path | None = None  # the worktree's own git directory, as git made it

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


def git_location(path: Path) -> tuple[Path, str] | None:
    """The top of the git work tree holding ``path`` (with at least one commit) and ``path``'s place
    in it (``""`` or ``"dir/"``); None outside a repository."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel", "--show-prefix", "--verify", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    lines = out.stdout.splitlines()
    return Path(lines[0]).resolve(), (lines[1] if len(lines) > 2 else "")


def _gitdir(worktree: Path) -> Path:
    """The git directory git wrote into a new worktree's ``.git`` file."""
    text = (worktree / ".git").read_text().strip()
    return (worktree / text.removeprefix("gitdir:").strip()).resolve()


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
    commit: str | None = None,
    patch: bytes | None = None,
) -> Workspace:
    """Create the workspace: a worktree of ``commit`` (or of HEAD when ``source`` is a repository's
    top), else a plain directory holding copies of ``items`` (paths relative to ``source``), so a
    session sees only its own files (module docstring). ``patch`` (a ``git diff --binary``) is applied
    to a worktree before the sandbox's user is given the files; one that does not apply raises
    ValueError.
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
    where = git_location(source) if source is not None else None
    repo: Path | None = None
    worktree: Path | None = None
    gitdir: Path | None = None
    if where is not None and (commit is not None or not where[1]):
        repo, prefix = where
        worktree = workdir
        marker["worktree_of"] = str(repo)
        _write_marker(base, marker)  # before the worktree exists: a crash in between is still reaped
        with _worktrees_of(repo):  # git's bookkeeping only; the files are written after
            _git(repo, "worktree", "add", "--detach", "--no-checkout", "--quiet", str(worktree), commit or "HEAD")
        _checkout(worktree)
        if patch:
            _apply(worktree, patch)
        gitdir = _gitdir(worktree)
        marker["gitdir"] = str(gitdir)
        _write_marker(base, marker)
        workdir = worktree / prefix if prefix else worktree
        workdir.mkdir(parents=True, exist_ok=True)
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
    return Workspace(sandbox_id, session_id, base, workdir, tmpdir, repo, worktree, gitdir)


def _apply(workdir: Path, patch: bytes) -> None:
    """Apply a ``git diff --binary`` patch to the worktree's files (its index and the repository's
    refs are left alone). Raises ValueError with git's reason when it does not apply."""
    done = subprocess.run(
        ["git", "-C", str(workdir), "apply", "--whitespace=nowarn", "-"],
        input=patch,
        capture_output=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(
            f"the change does not apply to its base: {_reason(done, first=True, missing='git apply failed')}"
        )


def remove_workspace(base: Path) -> bool:
    """Remove a workspace (and its git worktree registration). Safe on half-created ones, and beside
    another engine removing it at the same time; True when this call removed it."""
    if not base.exists():
        return False
    try:
        marker = json.loads((base / MARKER).read_text())
    except (OSError, ValueError):
        marker = {}
    repo = marker.get("worktree_of")
    # the files first, side by side with other workspaces' (rmtree tolerates what is already gone); the
    # marker goes last
    try:
        children = sorted(base.iterdir(), key=lambda p: p.name == MARKER)
    except FileNotFoundError:  # another engine's reaper removed it meanwhile
        children = []
    for child in children:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                child.unlink()
    removed = False  # by this call: another engine's reaper may have got there first
    with contextlib.suppress(OSError):
        base.rmdir()
        removed = True
    if repo:
        # then git's bookkeeping: the worktree's registration (its files are gone, which git allows),
        # and any registration a crash left behind
        with _worktrees_of(Path(repo)):
            for args in (("worktree", "remove", "--force", str(base / "work")), ("worktree", "prune")):
                subprocess.run(["git", "-C", repo, *args], capture_output=True, timeout=120, check=False)
    return removed


def _git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd``; its output, or OSError with git's own reason."""
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, timeout=300, check=False)
    if done.returncode != 0:
        raise OSError(f"{' '.join(['git', *args[:2]])} failed: {_reason(done)}")
    return done.stdout.decode(errors="replace")


def _reason(done: subprocess.CompletedProcess[bytes], *, first: bool = False, missing: str = "") -> str:
    """A failed command's reason in one line: the first or last line of its stderr (else ``missing``,
    else its exit code)."""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return (lines[0] if first else lines[-1]) if lines else missing or f"exit {done.returncode}"


def _checkout(worktree: Path) -> None:
    """Write a worktree's files as ``git worktree add`` does after its bookkeeping: a hard reset to its
    HEAD, then the repository's ``post-checkout`` hook, if it has one (``core.hooksPath`` counts), run
    in the worktree with the arguments git gives it."""
    _git(worktree, "reset", "--hard", "--no-recurse-submodules", "--quiet")
    head, hook = _git(worktree, "rev-parse", "HEAD", "--git-path", "hooks/post-checkout").splitlines()
    path = worktree / hook  # relative to the worktree, or absolute
    if not (path.is_file() and os.access(path, os.X_OK)):
        return
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    done = subprocess.run(
        [str(path), "0" * len(head), head, "1"], cwd=worktree, env=env, capture_output=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise OSError(f"the repository's post-checkout hook failed: {_reason(done)}")


@contextlib.contextmanager
def _worktrees_of(repo: Path) -> Iterator[None]:
    """The repository's worktree lock, held around every change to git's worktree bookkeeping.

    git's worktree commands are not safe side by side. ``git worktree add`` writes the new worktree's
    files under ``.git/worktrees`` one by one (``commondir`` is written empty, then filled), and every
    worktree command reads all of them: another add beside it dies with "failed to read
    .../commondir", and a prune in that moment removes the half-made directory (exit 128). So adds,
    removals and prunes take this lock in turn; each holds it only for git's bookkeeping (the files
    of a worktree are written and removed outside it), so a session's start or end waits milliseconds
    for another's. The lock is an flock on the repository's top directory: engines in other
    processes on the same repository take part, and nothing is written into the repository for it.
    """
    try:
        fd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # gone, or not ours to open: git reports what matters
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
