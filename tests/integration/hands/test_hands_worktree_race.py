"""Workspaces coming and going on one repository at once, with real git.

A session's workspace is a ``git worktree add``; a workspace going away ends with ``git worktree
prune``. git's worktree commands are not safe side by side: a prune removes a worktree being added
before its ``locked`` file is written (exit 128: "could not open .../locked for writing"), and an add
reads every other worktree's files, one of them half-written by another add ("failed to read
.../commondir"). In a fleet, sessions start side by side and one ends while another starts all the
time: no start may fail for it. (Before the lock: 6 of 150 adds failed beside a prune loop; with a
lock that kept only prunes apart, 2 runs of 20 of this test on a loaded machine still had a failed add.)
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
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


def test_a_workspace_runs_the_repositorys_post_checkout_hook_as_git_worktree_add_does(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text('#!/bin/sh\necho "$@" > "$(pwd)/hook-args"\n')
    hook.chmod(0o755)
    plain = tmp_path / "plain"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(plain)], check=True)
    ws = create_workspace(tmp_path / "sandboxes", sandbox_id="s", session_id="s", owner="t", source=repo)
    assert (ws.workdir / "a.py").read_text() == "x = 1\n"
    assert (ws.workdir / "hook-args").read_text() == (plain / "hook-args").read_text()  # same arguments
    assert (plain / "hook-args").read_text().split()[2] == "1"


def test_a_failing_hook_or_an_unknown_commit_is_one_clear_reason(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    root = tmp_path / "sandboxes"
    with pytest.raises(OSError, match=r"^git worktree add failed: fatal: invalid reference: f{40}$"):
        create_workspace(root, sandbox_id="a", session_id="a", owner="t", source=repo, commit="f" * 40)
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\necho 'lfs: not installed' >&2\nexit 3\n")
    hook.chmod(0o755)
    with pytest.raises(OSError, match=r"^the repository's post-checkout hook failed: lfs: not installed$"):
        create_workspace(root, sandbox_id="b", session_id="b", owner="t", source=repo)
