"""The user's checkout: where a run's base comes from, and where ``apply`` merges the run's branch.

:func:`find_base` reads, never writes: ``HEAD`` of the repository that holds the input directory,
the input's place inside it, and whether the checkout has uncommitted changes to tracked files (the
run bases on ``HEAD`` all the same; its sessions do not see them). Untracked files do not count: a
store or an output directory of the engine's own often sits in the checkout.

:func:`apply_run` is the one operation that touches the user's checkout, and only when asked: it
refuses a checkout with uncommitted changes and a merge that would conflict (checked first with
``git merge-tree``, so nothing is left half-merged), then runs ``git merge`` as the user would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.changes.git import git, git_ok, user_git
from agent_fleet.errors import InputError, UsageError

__all__ = ["Applied", "RunBase", "apply_run", "find_base"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBase:
    """What a run's plan records of its base (``plan`` event, ``base``)."""

    repo: str  # the repository's top directory
    prefix: str  # the input directory inside it, "" or ending in "/"
    commit: str  # HEAD when the run started
    dirty: bool  # the checkout had uncommitted changes to tracked files then
    when: int  # the run's creation (seconds): the date of every commit the run writes

    def to_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "prefix": self.prefix, "commit": self.commit, "dirty": self.dirty, "when": self.when}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunBase:
        return cls(
            repo=str(d["repo"]),
            prefix=str(d.get("prefix", "")),
            commit=str(d["commit"]),
            dirty=bool(d.get("dirty", False)),
            when=int(d.get("when", 0)),
        )


def find_base(input_dir: str | Path, *, now: float | None = None) -> RunBase | None:
    """The base of a run over ``input_dir``; None when it is not inside a git repository with a
    commit, or not in that commit at all (an untracked directory)."""
    path = Path(input_dir)
    if not path.is_dir():
        return None
    where = git(path, "rev-parse", "--show-toplevel", "--show-prefix", check=False)
    head = git(path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if where.returncode != 0 or head.returncode != 0:
        return None
    lines = where.stdout.decode().splitlines()
    top, prefix = lines[0], (lines[1] if len(lines) > 1 else "")
    if prefix and not git_ok(top, "rev-parse", "--verify", "--quiet", f"HEAD:{prefix}"):
        return None  # the input is not in HEAD (an untracked directory): its worktrees would be empty
    status = git(top, "status", "--porcelain", "-z", "--untracked-files=no", "--ignore-submodules=dirty", check=False)
    return RunBase(
        repo=top,
        prefix=prefix,
        commit=head.stdout.decode().strip(),
        dirty=status.returncode == 0 and bool(status.stdout.strip(b"\0")),
        when=int(time.time() if now is None else now),
    )


@dataclass(frozen=True, slots=True)
class Applied:
    repo: str
    branch: str
    merged_into: str  # the checked-out branch (or "HEAD" when detached)
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def apply_run(repo: str | Path, branch: str) -> Applied:
    """Merge ``branch`` into the checkout of ``repo`` (module docstring). Raises :class:`UsageError`
    with one line when it refuses; nothing is touched then."""
    repo = str(repo)
    if not Path(repo).is_dir():
        raise InputError(f"the run's repository {repo} is gone")
    if not git_ok(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"):
        raise InputError(f"there is no branch {branch} in {repo}: the run has not merged its changes yet")
    if git(repo, "rev-parse", "--is-bare-repository").stdout.strip() == b"true":
        raise UsageError(f"{repo} is a bare repository: there is no checkout to apply {branch} to")
    status = git(repo, "status", "--porcelain", "-z", "--untracked-files=no")
    if status.stdout.strip(b"\0"):
        n = sum(1 for rec in status.stdout.split(b"\0") if rec[:2].strip())
        raise UsageError(
            f"the checkout at {repo} has uncommitted changes ({n} file(s)): commit or stash them, then apply {branch}"
        )
    head = git(repo, "rev-parse", "HEAD").stdout.decode().strip()
    current = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    into = current.stdout.decode().strip() if current.returncode == 0 else "HEAD"
    tip = git(repo, "rev-parse", f"refs/heads/{branch}").stdout.decode().strip()
    if git_ok(repo, "merge-base", "--is-ancestor", tip, head):
        return Applied(repo, branch, into, head, head)  # already in the checkout
    out = git(repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", head, tip, check=False)
    if out.returncode == 1:
        paths = [p for p in out.stdout.decode().splitlines()[1:] if p]
        raise UsageError(f"{branch} conflicts with {into} in {', '.join(paths[:10])}: nothing was merged")
    merged = user_git(repo, "merge", "--no-edit", "--quiet", f"refs/heads/{branch}", check=False)
    if merged.returncode != 0:
        text = (merged.stderr or merged.stdout).decode(errors="replace").strip().splitlines()
        user_git(repo, "merge", "--abort", check=False)
        raise UsageError(f"git merge of {branch} failed: {text[0] if text else 'no message'}")
    after = git(repo, "rev-parse", "HEAD").stdout.decode().strip()
    return Applied(repo, branch, into, head, after)
