"""Real git repositories in temporary directories, for the changes plane's tests."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

__all__ = ["checkout_state", "git", "make_repo", "worktree"]

IDENTITY = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]


def git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    out = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, input=input, capture_output=True, env=env, check=True)
    return out.stdout.decode().strip()


def make_repo(root: Path, files: dict[str, bytes | str]) -> tuple[Path, str]:
    """A repository at ``root/repo`` whose one commit holds ``files``; returns it and the commit."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for rel, content in files.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo, git(repo, "rev-parse", "HEAD")


def worktree(repo: Path, path: Path, commit: str) -> tuple[Path, Path]:
    """A detached worktree of ``commit`` at ``path``; returns it and its git directory."""
    git(repo, "worktree", "add", "--detach", "-q", str(path), commit)
    return path, Path(git(path, "rev-parse", "--absolute-git-dir"))


def checkout_state(repo: Path) -> dict[str, str]:
    """Everything of the user's checkout a run must leave as it was: HEAD, the branch, the index's
    bytes, the stash and every working-tree file's bytes."""
    state = {
        "HEAD": (repo / ".git" / "HEAD").read_text(),
        "head": git(repo, "rev-parse", "HEAD"),
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "stash": git(repo, "stash", "list"),
    }
    for dirpath, dirnames, filenames in os.walk(repo):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            p = Path(dirpath) / name
            state[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
    return state
