"""Commits written in one ``git fast-import`` stream: a run's many small commits in one process.

A commit here is its parent, its second parent (a merge), and what it changes — file entries
(``M MODE BLOB PATH`` / ``D PATH``) or a whole tree — with a fixed identity and date, so the same
input always gives the same commit ids. Refs are moved with ``--force`` (a rebuilt branch replaces
the one a killed run left) at each checkpoint and at the end. Nothing else of the repository is
touched: no index, no working tree, no HEAD.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_fleet.changes.change_record import FileChange
from agent_fleet.changes.git import git

__all__ = ["Commit", "Identity", "quote_path", "write_commits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """Author and committer of every fleet commit: fixed, so a commit id depends on its content only."""

    name: str = "agent-fleet"
    email: str = "fleet@agent-fleet.invalid"
    when: int = 0  # seconds since the epoch (the run's creation), always UTC

    def line(self) -> bytes:
        return f"{self.name} <{self.email}> {self.when} +0000".encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit:
    """One commit of a stream. ``parent``: a commit id, or the key of an earlier commit of the stream;
    ``merge``: the same for a second parent; ``tree``: the whole tree (else ``files`` change the
    parent's)."""

    key: str
    ref: str  # refs/heads/…
    parent: str
    message: str
    files: Sequence[FileChange] = ()
    merge: str | None = None
    tree: str | None = None
    checkpoint: bool = False  # move the refs once this commit is written


def quote_path(path: str) -> bytes:
    """A path in C-style quotes, as fast-import accepts it everywhere."""
    out = bytearray(b'"')
    for byte in path.encode("utf-8"):
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    out += b'"'
    return bytes(out)


@dataclass(slots=True)
class _Stream:
    identity: Identity
    marks: dict[str, int] = field(default_factory=dict)
    parts: list[bytes] = field(default_factory=list)
    tip: dict[str, str] = field(default_factory=dict)  # each ref's last commit in the stream, by key

    def ref_of(self, key_or_id: str) -> bytes:
        mark = self.marks.get(key_or_id)
        return f":{mark}".encode() if mark is not None else key_or_id.encode()

    def add(self, c: Commit) -> None:
        mark = self.marks[c.key] = len(self.marks) + 1
        who = self.identity.line()
        msg = c.message.encode("utf-8")
        p = self.parts
        # A commit on top of the one just written on its ref needs no ``reset``/``from``: fast-import
        # goes on from the tree it holds, instead of dropping it and reading it back from its pack.
        if self.tip.get(c.ref) != c.parent:
            p.append(b"reset %s\nfrom %s\n\n" % (c.ref.encode(), self.ref_of(c.parent)))
        self.tip[c.ref] = c.key
        p.append(b"commit %s\nmark :%d\nauthor %s\ncommitter %s\n" % (c.ref.encode(), mark, who, who))
        p.append(b"data %d\n%s\n" % (len(msg), msg))
        if c.merge is not None:
            p.append(b"merge %s\n" % self.ref_of(c.merge))
        if c.tree is not None:
            p.append(b'M 040000 %s ""\n' % c.tree.encode())
        for f in c.files:
            if f.old_path is not None:
                p.append(b"D %s\n" % quote_path(f.old_path))
            if f.status == "deleted":
                p.append(b"D %s\n" % quote_path(f.path))
            else:
                p.append(b"M %s %s %s\n" % (f.mode.encode(), f.blob.encode(), quote_path(f.path)))
        p.append(b"\n")
        if c.checkpoint:
            p.append(b"checkpoint\n\n")


def write_commits(repo: Path, commits: Sequence[Commit], identity: Identity) -> dict[str, str]:
    """Write ``commits`` (in order) and move their refs; returns each commit's id by its key."""
    if not commits:
        return {}
    stream = _Stream(identity)
    for c in commits:
        stream.add(c)
    stream.parts.append(b"done\n")
    with tempfile.TemporaryDirectory(prefix="fleet-import-") as tmp:
        marks = Path(tmp) / "marks"
        git(
            repo,
            "fast-import",
            "--quiet",
            "--done",
            "--force",
            "--date-format=raw",
            f"--export-marks={marks}",
            input=b"".join(stream.parts),
        )
        by_mark = dict(line.split(" ", 1) for line in marks.read_text().split("\n") if line)
    return {key: by_mark[f":{mark}"].strip() for key, mark in stream.marks.items()}
