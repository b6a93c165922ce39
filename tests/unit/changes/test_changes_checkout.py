"""The user's checkout: a run's base is read without a write, and ``apply`` merges the run's branch
only into a clean checkout, refusing (and touching nothing) otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import checkout_state, git, make_repo, worktree

from agent_fleet.changes import Identity, Planned, apply_run, capture, find_base, integrate
from agent_fleet.errors import InputError, UsageError

LIMITS = {"max_file_bytes": 1 << 20, "max_patch_bytes": 1 << 22}


def test_the_base_is_head_with_the_inputs_place_and_reading_it_writes_nothing(tmp_path: Path) -> None:
    repo, head = make_repo(tmp_path, {"sub/a.py": "a = 1\n", "b.py": "b = 1\n"})
    (repo / "b.py").write_text("b = 2\n")  # uncommitted: the run bases on HEAD and says so
    (repo / "untracked.txt").write_text("x\n")
    before = checkout_state(repo)
    base = find_base(repo / "sub", now=1234.5)
    assert base is not None
    assert (base.repo, base.prefix, base.commit, base.dirty, base.when) == (str(repo), "sub/", head, True, 1234)
    assert checkout_state(repo) == before  # not even the index's stat cache was refreshed
    git(repo, "checkout", "--", "b.py")
    clean = find_base(repo)
    assert clean is not None and not clean.dirty and clean.prefix == ""  # untracked files do not count
    plain = tmp_path / "plain"
    plain.mkdir()
    assert find_base(plain) is None
    (repo / "new").mkdir()
    (repo / "new/c.py").write_text("c = 1\n")
    assert find_base(repo / "new") is None  # not in HEAD: the run keeps no changes


def _run_branch(tmp_path: Path) -> tuple[Path, str]:
    repo, base = make_repo(tmp_path, {"a.py": "a = 1\n", "b.py": "b = 1\n"})
    wt, gitdir = worktree(repo, tmp_path / "wt", base)
    (wt / "a.py").write_text("a = 2\n")
    change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
    integrate(
        repo,
        run_id="run-x",
        base=base,
        identity=Identity(when=1),
        task="t",
        planned=[Planned("run-x.s00000", "p0000", change)],
    )
    return repo, base


def test_apply_merges_the_runs_branch_into_the_checked_out_branch(tmp_path: Path) -> None:
    repo, _base = _run_branch(tmp_path)
    git(repo, "commit", "-q", "--allow-empty", "-m", "the user went on meanwhile")
    done = apply_run(repo, "fleet/run-x")
    assert done.changed and done.merged_into == "main"
    assert (repo / "a.py").read_text() == "a = 2\n"
    assert git(repo, "status", "--porcelain") == ""
    again = apply_run(repo, "fleet/run-x")
    assert not again.changed  # already in the checkout


def test_apply_refuses_a_dirty_checkout_and_a_conflict_and_touches_nothing(tmp_path: Path) -> None:
    repo, _base = _run_branch(tmp_path)
    (repo / "b.py").write_text("b = 3\n")
    before = checkout_state(repo)
    with pytest.raises(UsageError, match="uncommitted changes"):
        apply_run(repo, "fleet/run-x")
    assert checkout_state(repo) == before
    git(repo, "checkout", "--", "b.py")
    (repo / "a.py").write_text("a = 99\n")
    git(repo, "commit", "-q", "-am", "a conflicting edit")
    before = checkout_state(repo)
    with pytest.raises(UsageError, match=r"conflicts with main in a\.py"):
        apply_run(repo, "fleet/run-x")
    assert checkout_state(repo) == before
    with pytest.raises(InputError, match="no branch fleet/run-y"):
        apply_run(repo, "fleet/run-y")
