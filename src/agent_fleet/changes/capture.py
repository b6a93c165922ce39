"""Capture a session's change: its worktree against the run's base commit, as one patch.

The worktree's own index is copied to a temporary file (its stat cache makes ``git add -A`` quick)
and everything goes through that copy (``GIT_INDEX_FILE``), so neither the user's checkout nor the
session's index is touched. The result is the worktree as it is — commits the agent made itself
included, since the working tree holds them — compared with the base by one
``git diff-index --cached`` that prints the raw entries, their line counts and the patch together.

Untracked files the repository ignores are not part of the change, nor are the ``ignore`` patterns
(gitignore syntax, untracked files only): the sandbox's own files in its home and well-known caches.
A path that cannot be carried is refused with its reason and put back as the base has it, so the
rest of the change is carried exactly: a file over ``max_file_bytes``, a nested repository or
submodule (a patch cannot hold one), a path that is not UTF-8, a file git could not read. A change
whose patch is over ``max_patch_bytes`` keeps its file list and is refused as a whole (``note``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_fleet.changes.change_record import Change, FileChange, Refusal
from agent_fleet.changes.git import git

__all__ = ["DEFAULT_IGNORE", "RawEntry", "capture", "parse_diff"]

_ZERO = "0" * 40
_GITLINK = "160000"
# Untracked files that are never a session's work: compiled Python and tool caches. A repository that
# tracks such a file still carries its changes (these patterns only hide untracked files).
DEFAULT_IGNORE = ("__pycache__/", "*.py[cod]", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/")
_DIFF = (
    "diff-index",
    "--cached",
    "-z",
    "--raw",
    "--numstat",
    "-p",
    "--binary",
    "--full-index",
    "-M",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


@dataclass(frozen=True, slots=True)
class RawEntry:
    """One entry of ``git diff --raw`` with its ``--numstat`` counts (paths as git wrote them)."""

    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str
    status: str  # A, D, M, T or R
    path: bytes
    old_path: bytes | None
    insertions: int
    deletions: int
    binary: bool


def _take(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.index(b"\0", pos)
    return data[pos:end], end + 1


def parse_diff(out: bytes) -> tuple[list[RawEntry], bytes]:
    """Split ``diff -z --raw --numstat -p`` output into its entries and the patch."""
    raws: list[tuple[list[str], bytes, bytes | None]] = []
    pos = 0
    while pos < len(out) and out[pos : pos + 1] == b":":
        meta, pos = _take(out, pos)
        fields = meta[1:].decode("ascii").split()
        first, pos = _take(out, pos)
        second = None
        if fields[4][:1] in ("R", "C"):
            second, pos = _take(out, pos)
        # a rename's raw record names the source first, then the destination
        raws.append((fields, second if second is not None else first, first if second is not None else None))
    entries: list[RawEntry] = []
    for fields, path, old in raws:
        counts, pos = _take(out, pos)
        added, removed, _rest = counts.split(b"\t", 2)
        if old is not None:  # numstat of a rename: "a\tb\t\0old\0new\0"
            _, pos = _take(out, pos)
            _, pos = _take(out, pos)
        binary = added == b"-"
        entries.append(
            RawEntry(
                old_mode=fields[0],
                new_mode=fields[1],
                old_blob=fields[2],
                new_blob=fields[3],
                status=fields[4][:1],
                path=path,
                old_path=old,
                insertions=0 if binary else int(added),
                deletions=0 if binary else int(removed),
                binary=binary,
            )
        )
    if entries and out[pos : pos + 1] == b"\0":
        pos += 1  # the separator between the counts and the patch
    return entries, out[pos:]


def _status(e: RawEntry) -> str:
    if e.status == "M" and e.old_blob == e.new_blob:
        return "mode"
    return {"A": "added", "D": "deleted", "M": "modified", "T": "type", "R": "renamed"}.get(e.status, "modified")


def _why_not(e: RawEntry, worktree: Path, max_file_bytes: int) -> str | None:
    """Why this entry cannot be carried (None: it can)."""
    for p in (e.path, e.old_path):
        if p is None:
            continue
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            return "the path is not valid UTF-8"
    if _GITLINK in (e.old_mode, e.new_mode):
        return "a nested git repository or submodule cannot be carried by a patch"
    if e.status == "D" or e.new_mode == "120000":
        return None
    try:
        size = os.lstat(worktree / os.fsdecode(e.path)).st_size
    except OSError:
        size = int(git(worktree, "cat-file", "-s", e.new_blob).stdout)
    if size > max_file_bytes:
        return f"{size:,} bytes, over the {max_file_bytes:,}-byte limit (fleet.yaml changes.max_file_bytes)"
    return None


def _unreadable(stderr: bytes) -> list[str]:
    """Paths ``git add --ignore-errors`` could not index (``unable to index file 'P'``)."""
    out = []
    for line in stderr.decode("utf-8", errors="replace").splitlines():
        _, sep, rest = line.partition("unable to index file '")
        if sep and rest.endswith("'"):
            out.append(rest[:-1])
    return out


def _put_back(env: dict[str, str], worktree: Path, entries: Sequence[RawEntry]) -> None:
    """Make the temporary index hold the base's version of each entry's paths."""
    lines = []
    for e in entries:
        if e.old_path is not None:  # a rename: the source comes back, the destination goes
            lines.append(f"{e.old_mode} {e.old_blob}\t".encode() + e.old_path + b"\0")
            lines.append(f"0 {_ZERO}\t".encode() + e.path + b"\0")
        elif e.status == "A":
            lines.append(f"0 {_ZERO}\t".encode() + e.path + b"\0")
        else:
            lines.append(f"{e.old_mode} {e.old_blob}\t".encode() + e.path + b"\0")
    git(worktree, "update-index", "-z", "--index-info", input=b"".join(lines), env=env)


def capture(
    worktree: Path,
    *,
    gitdir: Path,
    base: str,
    max_file_bytes: int,
    max_patch_bytes: int,
    ignore: Sequence[str] = (),
) -> Change:
    """The change of ``worktree`` (a worktree whose git directory is ``gitdir``) against ``base``."""
    with tempfile.TemporaryDirectory(prefix="fleet-capture-") as tmp:
        index = Path(tmp) / "index"
        env = {"GIT_DIR": str(gitdir), "GIT_WORK_TREE": str(worktree), "GIT_INDEX_FILE": str(index)}
        try:
            # With its modification time: git trusts an entry's stat data only when the file is older
            # than the index, so a copy dated now would hide an edit made in the same second.
            shutil.copy2(gitdir / "index", index)
        except FileNotFoundError:
            git(worktree, "read-tree", base, env=env)
        excludes = Path(tmp) / "exclude"
        excludes.write_text("".join(f"{p}\n" for p in (*DEFAULT_IGNORE, *ignore)), encoding="utf-8")
        added = git(
            worktree, "-c", f"core.excludesFile={excludes}", "add", "-A", "--ignore-errors", env=env, check=False
        )
        refused = [Refusal(p, "git could not read the file") for p in _unreadable(added.stderr)]
        if added.returncode != 0 and not refused:
            git(worktree, "-c", f"core.excludesFile={excludes}", "add", "-A", env=env)  # raises with git's reason
        entries, patch = parse_diff(git(worktree, *_DIFF, base, env=env).stdout)
        bad = [(e, why) for e in entries if (why := _why_not(e, worktree, max_file_bytes)) is not None]
        if bad:
            _put_back(env, worktree, [e for e, _ in bad])
            refused += [Refusal(os.fsdecode(e.path), why) for e, why in bad]
            entries, patch = parse_diff(git(worktree, *_DIFF, base, env=env).stdout)
    files = tuple(
        FileChange(
            path=e.path.decode(),
            status=_status(e),
            insertions=e.insertions,
            deletions=e.deletions,
            old_path=e.old_path.decode() if e.old_path is not None else None,
            binary=e.binary,
            mode="" if e.status == "D" else e.new_mode,
            blob="" if e.status == "D" else e.new_blob,
        )
        for e in entries
    )
    note = ""
    if len(patch) > max_patch_bytes:
        note = f"the patch is {len(patch):,} bytes, over the {max_patch_bytes:,}-byte limit (changes.max_patch_bytes)"
        patch = b""
    return Change(base=base, files=files, patch=patch, refused=tuple(refused), note=note)
