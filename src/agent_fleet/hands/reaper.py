"""The reaper: no sandbox, worktree or hands process outlives its session or its engine.

A sandbox is reaped when its owner (the engine process that created it, identified by pid and
start time so a reused pid does not count) is gone, or when the owner is this very process and the
sandbox's session is not among the live ones. Sandboxes of another live engine are left alone.

Processes are found by the ``FLEET_OWNER`` / ``FLEET_SANDBOX_ID`` markers in their environment, so
this also catches processes that left their process group, and MCP server processes of a dead
owner. Run it at startup (after a crash: ``reap(live_session_ids=set())``) and after sessions end.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from agent_fleet.hands import isolation
from agent_fleet.hands.workspace import MARKER, remove_workspace

__all__ = ["ReapReport", "Reaper"]


@dataclass(slots=True)
class ReapReport:
    sandboxes: list[str] = field(default_factory=list)  # sandbox ids removed
    worktrees: list[str] = field(default_factory=list)  # worktree paths removed
    processes: list[int] = field(default_factory=list)  # pids killed

    @property
    def empty(self) -> bool:
        return not (self.sandboxes or self.worktrees or self.processes)


class Reaper:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.me = isolation.owner_token()

    def _doomed(self, owner: str, session_id: str, live: Collection[str] | None) -> bool:
        if owner == self.me:
            return live is not None and session_id not in live
        return not isolation.owner_alive(owner)

    def reap(self, live_session_ids: Collection[str] | None = None) -> ReapReport:
        """Remove what belongs to dead owners, and this process's sandboxes of ended sessions.

        ``live_session_ids=None`` leaves this process's own sandboxes alone.
        """
        report = ReapReport()
        doomed_sandboxes: set[str] = set()
        for base in _subdirs(self.root):
            try:
                marker = json.loads((base / MARKER).read_text())
            except (OSError, ValueError):
                continue  # not ours, or a workspace still being written
            if not self._doomed(str(marker.get("owner", "")), str(marker.get("session_id", "")), live_session_ids):
                continue
            doomed_sandboxes.add(str(marker.get("sandbox_id", base.name)))
        dead_owners: dict[str, bool] = {}

        def match(marks: dict[str, str]) -> bool:
            if marks.get(isolation.SANDBOX_VAR) in doomed_sandboxes:
                return True
            owner = marks.get(isolation.OWNER_VAR)
            if owner is None or owner == self.me:
                return False
            if owner not in dead_owners:
                dead_owners[owner] = not isolation.owner_alive(owner)
            return dead_owners[owner]

        report.processes = isolation.kill_marked(match)
        for sid in sorted(doomed_sandboxes):
            base = self.root / sid
            try:
                repo = json.loads((base / MARKER).read_text()).get("worktree_of")
            except (OSError, ValueError):
                repo = None
            if remove_workspace(base):
                report.sandboxes.append(sid)
                if repo:
                    report.worktrees.append(str(base / "work"))
        return report

    def __repr__(self) -> str:
        return f"Reaper(root={self.root})"


def _subdirs(root: Path) -> list[Path]:
    """The directories under ``root``, none when it is gone (another engine's reaper may remove an
    empty run directory while this one looks)."""
    try:
        return sorted(p for p in root.iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
