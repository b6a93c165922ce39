"""How a run's sandboxes keep their sessions' changes (the hands port's ``WorkspaceChanges``).

A :class:`RunChanges` is plain data (it travels to a Ray node as it is): the repository, the input
directory's place in it, the base commit every worktree starts from, and the limits. ``capture``
turns a session's worktree into the data of its ``change`` event, with the paths outside the
partition listed; a worktree that changed nothing gives None (no event).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.changes.capture import capture
from agent_fleet.changes.checkout import RunBase
from agent_fleet.changes.scope import out_of_scope

__all__ = ["DEFAULT_MAX_FILE_BYTES", "DEFAULT_MAX_PATCH_BYTES", "RunChanges"]

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_PATCH_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RunChanges:
    repo: str
    prefix: str  # the input directory inside the repository: "" or "dir/"
    base: str
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_patch_bytes: int = DEFAULT_MAX_PATCH_BYTES
    ignore: tuple[str, ...] = ()  # fleet.yaml changes.ignore: more untracked files that are not the work

    @classmethod
    def of(cls, base: RunBase, **limits: Any) -> RunChanges:
        return cls(repo=base.repo, prefix=base.prefix, base=base.commit, **limits)

    def capture(
        self, worktree: Path, *, gitdir: Path, items: Sequence[str], scratch: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """The ``change`` event of the session whose worktree (repository top) is ``worktree``;
        ``items``: its partition's paths and ``scratch``: its sandbox's own files (patterns), both
        relative to the input directory."""
        anchored = tuple("/" + self.prefix + s.lstrip("/") for s in scratch)
        change = capture(
            worktree,
            gitdir=gitdir,
            base=self.base,
            max_file_bytes=self.max_file_bytes,
            max_patch_bytes=self.max_patch_bytes,
            ignore=(*self.ignore, *anchored),
        )
        if change.empty:
            return None
        return change.with_scope(out_of_scope(change.paths, items, self.prefix)).to_event()
