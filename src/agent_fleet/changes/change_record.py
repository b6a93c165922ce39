"""A session's change as the session log records it (the ``change`` event's data).

A :class:`Change` is complete on its own: the patch (``git diff --binary --full-index`` of the
session's worktree against the run's base commit) is what every branch is built from, so a branch
can be rebuilt from the log on any machine that has the base. ``files`` carry each path's new blob
id and mode: a branch rebuilt from the patch is checked against them, so a change is either carried
exactly or refused — never carried corrupted.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Change", "FileChange", "Refusal"]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One path of a change. ``status``: added, modified, deleted, renamed, mode (the mode alone
    changed) or type (a file became a symbolic link or back)."""

    path: str
    status: str
    insertions: int = 0
    deletions: int = 0
    old_path: str | None = None  # renamed: where it came from
    binary: bool = False
    mode: str = ""  # the new mode ("100644", "100755", "120000"); empty once deleted
    blob: str = ""  # the new blob id; empty once deleted

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "status": self.status,
            "insertions": self.insertions,
            "deletions": self.deletions,
        }
        if self.old_path is not None:
            d["old_path"] = self.old_path
        if self.binary:
            d["binary"] = True
        if self.mode:
            d["mode"] = self.mode
        if self.blob:
            d["blob"] = self.blob
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FileChange:
        return cls(
            path=str(d["path"]),
            status=str(d["status"]),
            insertions=int(d.get("insertions", 0)),
            deletions=int(d.get("deletions", 0)),
            old_path=str(d["old_path"]) if d.get("old_path") is not None else None,
            binary=bool(d.get("binary", False)),
            mode=str(d.get("mode", "")),
            blob=str(d.get("blob", "")),
        )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A path the change does not carry, and why (over the size limit, a nested repository …)."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Change:
    base: str  # the commit the session's worktree started from
    files: tuple[FileChange, ...]
    patch: bytes  # git diff --binary --full-index -M base..(the session's tree)
    refused: tuple[Refusal, ...] = ()
    out_of_scope: tuple[str, ...] = ()  # paths outside the partition (a change with any is not merged)
    note: str = ""  # why the change as a whole is not carried (its patch is over the limit), else empty
    digest: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", hashlib.sha256(self.patch).hexdigest())

    @property
    def insertions(self) -> int:
        return sum(f.insertions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the change touches (a rename touches where it came from too)."""
        out: dict[str, None] = {}
        for f in self.files:
            if f.old_path is not None:
                out[f.old_path] = None
            out[f.path] = None
        return tuple(out)

    @property
    def carried(self) -> bool:
        """Whether there is something to commit: files, and the change as a whole was not refused."""
        return bool(self.files) and not self.note

    @property
    def empty(self) -> bool:
        return not self.files and not self.refused and not self.note

    def to_event(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "base": self.base,
            "files": [f.to_dict() for f in self.files],
            "insertions": self.insertions,
            "deletions": self.deletions,
            "out_of_scope": list(self.out_of_scope),
            "refused": [r.to_dict() for r in self.refused],
            "bytes": len(self.patch),
            "digest": self.digest,
        }
        if self.note:
            data["note"] = self.note
        try:
            data["patch"] = self.patch.decode("utf-8")
        except UnicodeDecodeError:  # text in another encoding: carried byte for byte
            data["patch_base64"] = base64.b64encode(self.patch).decode("ascii")
        return data

    @classmethod
    def from_event(cls, data: Mapping[str, Any]) -> Change:
        if data.get("patch_base64") is not None:
            patch = base64.b64decode(str(data["patch_base64"]))
        else:
            patch = str(data.get("patch", "")).encode("utf-8")
        return cls(
            base=str(data["base"]),
            files=tuple(FileChange.from_dict(f) for f in data.get("files") or ()),
            patch=patch,
            refused=tuple(Refusal(str(r["path"]), str(r["reason"])) for r in data.get("refused") or ()),
            out_of_scope=tuple(str(p) for p in data.get("out_of_scope") or ()),
            note=str(data.get("note", "")),
            digest=str(data.get("digest", "")),
        )

    def with_scope(self, outside: Iterable[str]) -> Change:
        return Change(self.base, self.files, self.patch, self.refused, tuple(outside), self.note, self.digest)
