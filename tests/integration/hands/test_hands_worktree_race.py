"""Workspaces coming and going on one repository at once, with real git.

A session's workspace is a ``git worktree add``; a workspace going away ends with ``git worktree
prune``. git makes a new worktree's directory under ``.git/worktrees`` a moment before it writes the
``locked`` file that keeps a prune away, so a prune in that moment removes the new worktree's
directory and the add fails (exit 128: "could not open .../locked for writing"). In a fleet, one
session ends while another starts all the time: no start may fail for it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from _hands_support import git_repo, worktrees

from agent_fleet.hands.workspace import MARKER, create_workspace, remove_workspace

ADDS = 60  # in two threads: sessions start side by side too


def test_worktrees_are_added_while_others_are_removed(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {f"pkg/m{i}.py": f"x = {i}\n" for i in range(50)})
    root = tmp_path / "sandboxes"
    stop = threading.Event()
    prunes = 0

    def ending_sessions() -> None:
        # Workspaces whose worktree is already gone: each removal ends with a prune, as fast as it goes.
        nonlocal prunes
        i = 0
        while not stop.is_set():
            base = root / f"ended-{i}"
            base.mkdir(parents=True)
            (base / MARKER).write_text(f'{{"worktree_of": "{repo}"}}')
            remove_workspace(base)
            prunes += 1
            i += 1

    failures: list[BaseException] = []
    made = []

    def starting_sessions(first: int) -> None:
        for i in range(first, ADDS, 2):
            try:
                made.append(create_workspace(root, sandbox_id=f"s{i}", session_id=f"s{i}", owner="t", source=repo))
            except Exception as exc:  # every failed start is counted
                failures.append(exc)

    ender = threading.Thread(target=ending_sessions)
    starters = [threading.Thread(target=starting_sessions, args=(first,)) for first in (0, 1)]
    ender.start()
    try:
        for t in starters:
            t.start()
        for t in starters:
            t.join()
    finally:
        stop.set()
        ender.join()
    assert prunes >= ADDS // 4, prunes  # removals really ran beside the adds
    assert failures == [], f"{len(failures)} of {ADDS} starts failed: {failures[0]!r}"
    assert len(made) == ADDS
    assert all((ws.workdir / "pkg" / "m7.py").read_text() == "x = 7\n" for ws in made)
    assert len(worktrees(repo)) == ADDS + 1  # every worktree registered, none pruned from under it
    for ws in made:
        assert remove_workspace(ws.base)
    assert worktrees(repo) == [str(repo)]
