"""The changes plane's port: what the rest of the engine may use of it, and the seams it offers.

* :class:`ChangeChecker`: runs a check per change (``--check CMD``) before the run's changes are
  merged; integration merges a change only when its outcome passed (or when no checker is set).
* :class:`PushHook`: called with the run's branches once they are written (``--push REMOTE``).

A change offered to a check is a :class:`ChangeToCheck`: its own branch holds the base plus that one
change, so a check's sandbox is a worktree of ``commit``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent_fleet.changes.change_record import Change

__all__ = ["CHECK_OUTCOMES", "ChangeChecker", "ChangeToCheck", "CheckOutcome", "PushHook"]

CHECK_OUTCOMES = ("passed", "failed", "timeout", "skipped")


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    outcome: str  # one of CHECK_OUTCOMES
    duration_s: float = 0.0
    output_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "duration_s": self.duration_s, "output_tail": self.output_tail}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckOutcome:
        return cls(str(d["outcome"]), float(d.get("duration_s", 0.0)), str(d.get("output_tail", "")))


@dataclass(frozen=True, slots=True)
class ChangeToCheck:
    session_id: str
    partition_id: str
    repo: str  # the repository's top
    prefix: str  # the input directory inside it ("" or "dir/"): a check's working directory
    base: str
    branch: str  # the change's own branch
    commit: str  # its commit: the base plus this change alone
    change: Change


class ChangeChecker(Protocol):
    async def check(self, run_id: str, changes: Sequence[ChangeToCheck]) -> Mapping[str, CheckOutcome]:
        """Each change's outcome by session id (recording them is the checker's: a resumed run asks
        again and must get the recorded outcome, not a second check). A change it leaves out is
        treated as unchecked (merged)."""


class PushHook(Protocol):
    async def push(self, run_id: str, repo: str, branches: Sequence[str]) -> None:
        """Push the run's branches (the run's own first) to wherever the run was asked to."""
