"""A run's changes as branches: one per session (``fleet/RUN.PARTITION``), and the run's own
(``fleet/RUN``) holding every mergeable change merged in partition order.

Everything is rebuilt from the recorded changes alone, deterministically: a change's commit is its
patch applied to the base with the run's fixed identity and date, and each merge commit is the
previous tip, the change's commit and their merged tree. So integrating again — after ``kill -9``
in the middle of it, after a resume that added changes, on another machine with the same base —
gives the very same commit ids, and the branches are moved to them (``--force``).

When the blobs a change names are already in the repository (the change was captured here), its
commit is written from its file entries directly; otherwise its patch is applied to the base in a
temporary index first, and the blobs that produces must be the ones recorded, or the change is
refused (``does not reproduce``) rather than committed different. Changes whose paths are disjoint
from everything merged before them (exclusive partitions make that the rule) merge by adding their
entries to the tip; one that overlaps is merged by ``git merge-tree`` and, if that conflicts, stays
on its own branch with the conflicting paths as its reason.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_fleet.changes.change_record import Change
from agent_fleet.changes.fastimport import Commit, Identity, write_commits
from agent_fleet.changes.git import git, git_ok
from agent_fleet.errors import GitError, InputError

__all__ = [
    "Integration",
    "Planned",
    "Placed",
    "base_missing",
    "commit_changes",
    "integrate",
    "merge_changes",
    "partition_branch",
    "run_branch",
]

CHECKPOINT_EVERY = 256  # merges between two moves of the run's branch (progress a kill leaves visible)


def run_branch(run_id: str) -> str:
    return f"fleet/{run_id}"


def partition_branch(run_id: str, partition_id: str) -> str:
    """A session's branch. Not ``fleet/RUN/PARTITION``: git cannot hold a branch ``fleet/RUN`` and
    branches under ``fleet/RUN/`` at once (a ref is a file, or a directory of refs)."""
    return f"fleet/{run_id}.{partition_id}"


@dataclass(frozen=True, slots=True)
class Planned:
    """A recorded change as integration takes it: ``blocked`` says why it must not be merged (paths
    out of scope, a failed check); None: it is merged if it merges cleanly."""

    session_id: str
    partition_id: str
    change: Change
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class Placed:
    """Where a change ended up: its branch and commit (None when it could not be committed), whether
    it is in the run's branch, and why not."""

    session_id: str
    partition_id: str
    branch: str | None
    commit: str | None
    merged: bool
    reason: str | None
    check: dict[str, Any] | None = None  # the check's outcome (--check), None when none ran

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "partition_id": self.partition_id,
            "branch": self.branch,
            "commit": self.commit,
            "merged": self.merged,
            "reason": self.reason,
            "check": self.check,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Placed:
        return cls(
            str(d["session_id"]),
            str(d["partition_id"]),
            d.get("branch"),
            d.get("commit"),
            bool(d.get("merged")),
            d.get("reason"),
            d.get("check"),
        )


@dataclass(frozen=True, slots=True)
class Integration:
    base: str
    branch: str
    commit: str  # the run's branch tip
    placed: tuple[Placed, ...]

    def to_event(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "branch": self.branch,
            "commit": self.commit,
            "changes": [p.to_dict() for p in self.placed],
            "merged": sum(1 for p in self.placed if p.merged),
        }

    @classmethod
    def from_event(cls, data: Mapping[str, Any]) -> Integration:
        placed = tuple(Placed.from_dict(p) for p in data.get("changes") or ())
        return cls(str(data["base"]), str(data["branch"]), str(data["commit"]), placed)


def base_missing(repo: Path | str, base: str) -> str | None:
    """Why the base commit cannot be used (None: it is there)."""
    if not Path(repo).is_dir():
        return f"the repository {repo} is gone"
    if not git_ok(repo, "cat-file", "-e", f"{base}^{{commit}}"):
        return f"the base commit {base[:12]} is no longer in {repo} (was its history rewritten?)"
    return None


def _missing_blobs(repo: Path, blobs: Iterable[str]) -> set[str]:
    wanted = sorted(set(blobs))
    if not wanted:
        return set()
    out = git(repo, "cat-file", "--batch-check", input="".join(f"{b}\n" for b in wanted).encode()).stdout
    return {line.split()[0] for line in out.decode().splitlines() if line.endswith(" missing")}


def _materialize(repo: Path, base: str, change: Change) -> str | None:
    """Apply the change's patch to the base in a temporary index (its blobs land in the repository);
    why that did not give the recorded files, or None."""
    with tempfile.TemporaryDirectory(prefix="fleet-apply-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", base, env=env)
        applied = git(repo, "apply", "--cached", "-", input=change.patch, env=env, check=False)
        if applied.returncode != 0:
            first = applied.stderr.decode(errors="replace").strip().splitlines()
            return "its patch does not apply to the base: " + (first[0] if first else "git apply failed")
        paths = [f.path for f in change.files]
        listed = git(repo, "ls-files", "-s", "-z", "--", *(f":(literal){p}" for p in paths), env=env).stdout
    have: dict[str, tuple[str, str]] = {}
    for rec in listed.split(b"\0"):
        if rec:
            meta, _, path = rec.partition(b"\t")
            mode, blob, _stage = meta.decode().split()
            have[path.decode()] = (mode, blob)
    for f in change.files:
        got = have.get(f.path)
        want = None if f.status == "deleted" else (f.mode, f.blob)
        if got != want:
            return f"its patch does not reproduce the recorded {f.path} (not carried, to keep it uncorrupted)"
    return None


def _message(task: str, run_id: str, p: Planned) -> str:
    title = " ".join(task.split())[:72] or "fleet change"
    return f"{title}\n\nRun: {run_id}\nPartition: {p.partition_id}\nSession: {p.session_id}\n"


def _merge_tree(repo: Path, tip: str, commit: str) -> tuple[str, list[str]]:
    """The merged tree of two commits and the paths that conflict (empty: it merged cleanly)."""
    out = git(repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", tip, commit, check=False)
    if out.returncode not in (0, 1):
        raise GitError(f"git merge-tree failed: {out.stderr.decode(errors='replace').strip()[:200]}")
    lines = out.stdout.decode().splitlines()
    return lines[0], ([ln for ln in lines[1:] if ln] if out.returncode == 1 else [])


def commit_changes(
    repo: Path | str, *, run_id: str, base: str, identity: Identity, task: str, planned: Sequence[Planned]
) -> list[Placed]:
    """Each change on its own branch (the base plus that change), in ``planned``'s order: where it
    is, or why it could not be committed. Raises :class:`InputError` when the base commit is gone."""
    repo = Path(repo)
    why = base_missing(repo, base)
    if why is not None:
        raise InputError(why)
    blobs = (f.blob for p in planned if p.change.carried for f in p.change.files if f.blob)
    missing = _missing_blobs(repo, blobs)
    refused: dict[str, str] = {}
    heads: list[Commit] = []
    for p in planned:
        reason: str | None = None
        if not p.change.carried:
            reason = p.change.note or "nothing could be carried: " + "; ".join(
                f"{r.path}: {r.reason}" for r in p.change.refused
            )
        elif any(f.blob in missing for f in p.change.files):
            reason = _materialize(repo, base, p.change)
        if reason is not None:
            refused[p.session_id] = reason
            continue
        ref = f"refs/heads/{partition_branch(run_id, p.partition_id)}"
        message = _message(task, run_id, p)
        heads.append(Commit(key=p.session_id, ref=ref, parent=base, message=message, files=p.change.files))
    commit_of = write_commits(repo, heads, identity)
    out = []
    for p in planned:
        sid = p.session_id
        if sid in refused:
            out.append(Placed(sid, p.partition_id, None, None, False, refused[sid]))
        else:
            branch = partition_branch(run_id, p.partition_id)
            out.append(Placed(sid, p.partition_id, branch, commit_of[sid], False, None))
    return out


def merge_changes(
    repo: Path | str,
    *,
    run_id: str,
    base: str,
    identity: Identity,
    planned: Sequence[Planned],
    committed: Sequence[Placed],
    checkpoint_every: int = CHECKPOINT_EVERY,
) -> Integration:
    """The run's branch: every committed change not ``blocked`` merged in order onto the base (module
    docstring); ``committed`` is :func:`commit_changes`' answer for ``planned``."""
    placed: dict[str, Placed] = {}
    ready: list[Planned] = []
    commit_of: dict[str, str] = {}
    for p, c in zip(planned, committed, strict=True):
        if c.commit is None:
            placed[p.session_id] = c
        else:
            ready.append(p)
            commit_of[p.session_id] = c.commit
    tip = _chain(Path(repo), run_id, base, identity, ready, commit_of, placed, checkpoint_every)
    return Integration(base, run_branch(run_id), tip, tuple(placed[p.session_id] for p in planned))


def integrate(
    repo: Path | str,
    *,
    run_id: str,
    base: str,
    identity: Identity,
    task: str,
    planned: Sequence[Planned],
    checkpoint_every: int = CHECKPOINT_EVERY,
) -> Integration:
    """:func:`commit_changes` then :func:`merge_changes`: every session's branch and the run's."""
    committed = commit_changes(repo, run_id=run_id, base=base, identity=identity, task=task, planned=planned)
    return merge_changes(
        repo,
        run_id=run_id,
        base=base,
        identity=identity,
        planned=planned,
        committed=committed,
        checkpoint_every=checkpoint_every,
    )


def _chain(
    repo: Path,
    run_id: str,
    base: str,
    identity: Identity,
    ready: Sequence[Planned],
    commit_of: Mapping[str, str],
    placed: dict[str, Placed],
    checkpoint_every: int,
) -> str:
    """The run's branch: the mergeable changes merged in order onto the base; returns its tip."""
    ref = f"refs/heads/{run_branch(run_id)}"
    tip = base
    touched: set[str] = set()
    pending: list[Commit] = []

    def flush() -> str:
        nonlocal pending
        if not pending:
            return tip
        ids = write_commits(repo, pending, identity)
        last = ids[pending[-1].key]
        pending = []
        return last

    for p in ready:
        sid, branch, own = p.session_id, partition_branch(run_id, p.partition_id), commit_of[p.session_id]
        if p.blocked is not None:
            placed[sid] = Placed(sid, p.partition_id, branch, own, False, p.blocked)
            continue
        message = f"Merge {branch} into {run_branch(run_id)}\n\nSession: {sid}\n"
        paths = set(p.change.paths)
        parent = pending[-1].key if pending else tip
        if paths & touched:  # overlaps what is merged: a real three-way merge decides
            tip = flush()
            tree, conflicts = _merge_tree(repo, tip, own)
            if conflicts:
                why = "does not merge cleanly with the changes merged before it: " + ", ".join(conflicts[:20])
                placed[sid] = Placed(sid, p.partition_id, branch, own, False, why)
                continue
            step = Commit(key=sid, ref=ref, parent=tip, message=message, merge=own, tree=tree)
        else:
            step = Commit(key=sid, ref=ref, parent=parent, message=message, merge=own, files=p.change.files)
        touched |= paths
        pending.append(step)
        if len(pending) % checkpoint_every == 0:
            pending[-1] = replace(pending[-1], checkpoint=True)
        placed[sid] = Placed(sid, p.partition_id, branch, own, True, None)
    tip = flush()
    if tip == base:  # nothing merged: the run's branch is the base itself
        git(repo, "update-ref", ref, base)
    return tip
