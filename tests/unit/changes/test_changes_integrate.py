"""The run's branches from its recorded changes, with real git: partition order, out-of-scope and
conflicting changes kept off the run's branch, the same commit ids every time (also after kill -9
in the middle of merging), and the user's checkout never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gitrepo import checkout_state, git, make_repo, worktree

from agent_fleet.changes import Change, Identity, Planned, capture, integrate, out_of_scope
from agent_fleet.changes.integrate import base_missing

IDENT = Identity(when=1_700_000_000)
LIMITS = {"max_file_bytes": 1 << 20, "max_patch_bytes": 1 << 22}


def _changes(tmp_path: Path, n: int) -> tuple[Path, str, list[Planned]]:
    files = {f"pkg/m{i}.py": "".join(f"v{i}_{k} = {k}\n" for k in range(12)) for i in range(n)}
    repo, base = make_repo(tmp_path, files)
    planned = []
    for i in range(n):
        wt, gitdir = worktree(repo, tmp_path / f"wt{i}", base)
        text = (wt / f"pkg/m{i}.py").read_text()
        (wt / f"pkg/m{i}.py").write_text(text.replace(f"v{i}_0 = 0", f"v{i}_0 = {100 + i}"))
        change = capture(wt, gitdir=gitdir, base=base, **LIMITS)
        planned.append(Planned(f"run-x.s{i:05d}", f"p{i:04d}", change))
    return repo, base, planned


def test_in_scope_changes_merge_in_partition_order_and_the_others_keep_their_branch(tmp_path: Path) -> None:
    repo, base, planned = _changes(tmp_path, 4)
    before = checkout_state(repo)
    planned[2] = Planned(planned[2].session_id, planned[2].partition_id, planned[2].change, blocked="outside")
    result = integrate(repo, run_id="run-x", base=base, identity=IDENT, task="t", planned=planned)
    assert [(p.partition_id, p.merged) for p in result.placed] == [
        ("p0000", True),
        ("p0001", True),
        ("p0002", False),
        ("p0003", True),
    ]
    assert result.placed[2].reason == "outside" and result.placed[2].commit is not None
    assert git(repo, "rev-parse", "fleet/run-x") == result.commit
    # the run's branch: the merges, first parent after first parent, in partition order
    merged = git(repo, "log", "--first-parent", "--format=%P", f"{base}..fleet/run-x").splitlines()
    seconds = [line.split()[1] for line in reversed(merged)]
    assert seconds == [result.placed[i].commit for i in (0, 1, 3)]
    changed = git(repo, "diff", "--name-only", base, "fleet/run-x").splitlines()
    assert changed == ["pkg/m0.py", "pkg/m1.py", "pkg/m3.py"]
    for p in result.placed:  # each session's branch: the base plus its own change alone
        assert (
            git(repo, "diff", "--name-only", base, f"fleet/run-x.{p.partition_id}") == f"pkg/m{p.partition_id[-1]}.py"
        )
    again = integrate(repo, run_id="run-x", base=base, identity=IDENT, task="t", planned=planned)
    assert again == result  # the same changes, the same commits
    assert checkout_state(repo) == before


def test_an_overlapping_change_merges_three_way_or_stays_with_its_conflict(tmp_path: Path) -> None:
    repo, base = make_repo(tmp_path, {"f.txt": "".join(f"line {i}\n" for i in range(30))})
    edits = {
        "p0000": lambda t: t.replace("line 1\n", "LINE ONE\n"),
        "p0001": lambda t: t.replace("line 25\n", "LINE 25\n"),  # the same file, far away: merges
        "p0002": lambda t: t.replace("line 1\n", "line one\n"),  # the same line: conflicts
    }
    planned = []
    for n, (pid, edit) in enumerate(edits.items()):
        wt, gitdir = worktree(repo, tmp_path / pid, base)
        (wt / "f.txt").write_text(edit((wt / "f.txt").read_text()))
        planned.append(Planned(f"run-x.s{n:05d}", pid, capture(wt, gitdir=gitdir, base=base, **LIMITS)))
    result = integrate(repo, run_id="run-x", base=base, identity=IDENT, task="t", planned=planned)
    assert [p.merged for p in result.placed] == [True, True, False]
    assert result.placed[2].reason is not None and "f.txt" in result.placed[2].reason
    text = git(repo, "show", "fleet/run-x:f.txt")
    assert "LINE ONE" in text and "LINE 25" in text and "line one" not in text


def test_a_change_with_nothing_carried_gets_no_branch(tmp_path: Path) -> None:
    repo, base, planned = _changes(tmp_path, 1)
    empty = Planned("run-x.s00001", "p0001", Change(base, (), b"", note="the patch is over the limit"))
    result = integrate(repo, run_id="run-x", base=base, identity=IDENT, task="t", planned=[*planned, empty])
    assert result.placed[1].branch is None and result.placed[1].reason == "the patch is over the limit"
    assert git(repo, "branch", "--list", "fleet/run-x.p0001") == ""


def test_a_base_that_disappeared_is_said_in_one_line(tmp_path: Path) -> None:
    repo, _base = make_repo(tmp_path, {"a": "a\n"})
    why = base_missing(repo, "0123456789abcdef0123456789abcdef01234567")
    assert why is not None and "no longer in" in why and "\n" not in why
    assert "is gone" in str(base_missing(tmp_path / "nowhere", "0" * 40))


def test_scope_is_the_partitions_own_files_under_the_inputs_place_in_the_repository() -> None:
    assert out_of_scope(["sub/a.py", "sub/b.py", "c.py"], ["a.py"], "sub/") == ("c.py", "sub/b.py")
    assert out_of_scope(["a.py"], ["./a.py"], "") == ()


_CHILD = """
import sys, pickle
from agent_fleet.changes import integrate
args = pickle.load(open(sys.argv[1], "rb"))
integrate(args["repo"], run_id="run-x", base=args["base"], identity=args["ident"], task="t",
          planned=args["planned"], checkpoint_every=1)
"""

_SLOW_GIT = """#!{python}
import os, subprocess, sys, time
real = {real!r}
if "fast-import" in sys.argv and os.path.exists({gate!r}):
    os.remove({gate!r})  # only the chain's stream (the second one) goes slowly
    proc = subprocess.Popen([real, *sys.argv[1:]], stdin=subprocess.PIPE)
    for line in sys.stdin.buffer:
        proc.stdin.write(line)
        proc.stdin.flush()
        if line == b"checkpoint\\n":
            time.sleep(0.15)
    proc.stdin.close()
    sys.exit(proc.wait())
if "fast-import" in sys.argv:
    open({gate!r}, "w").close()
os.execv(real, [real, *sys.argv[1:]])
"""


def test_kill_9_in_the_middle_of_merging_then_again_gives_the_uninterrupted_branch(tmp_path: Path) -> None:
    import pickle
    import shutil

    repo, base, planned = _changes(tmp_path, 12)
    twin = tmp_path / "twin"
    shutil.copytree(repo, twin)  # the same repository, for the uninterrupted run
    uninterrupted = integrate(twin, run_id="run-x", base=base, identity=IDENT, task="t", planned=planned)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gate = tmp_path / "gate"
    real = shutil.which("git")
    assert real is not None
    shim = bin_dir / "git"
    shim.write_text(_SLOW_GIT.format(python=sys.executable, real=real, gate=str(gate)))
    shim.chmod(0o755)
    args = tmp_path / "args.pickle"
    args.write_bytes(pickle.dumps({"repo": repo, "base": base, "ident": IDENT, "planned": planned}))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(args)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        partial = ""
        while time.monotonic() < deadline and child.poll() is None:
            partial = git(repo, "for-each-ref", "--format=%(objectname)", "refs/heads/fleet/run-x")
            if partial and partial != base:
                break
            time.sleep(0.02)
        assert child.poll() is None, "the merge finished before it could be killed"
        os.killpg(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert partial and partial != uninterrupted.commit  # killed with the run's branch half made
    resumed = integrate(repo, run_id="run-x", base=base, identity=IDENT, task="t", planned=planned)
    assert resumed.commit == uninterrupted.commit
    assert git(repo, "rev-parse", "fleet/run-x") == uninterrupted.commit
    assert resumed.placed == uninterrupted.placed


def test_what_a_run_gives_its_sandboxes_travels_to_a_cluster_node_as_it_is() -> None:
    import pickle

    from agent_fleet.changes import RunChanges

    spec = RunChanges(repo="/r", prefix="pkg/", base="0" * 40, ignore=("*.log",))
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert {spec: 1}[RunChanges(repo="/r", prefix="pkg/", base="0" * 40, ignore=("*.log",))] == 1  # a cache key


def test_a_chain_written_in_one_stream_is_the_chain_written_a_commit_at_a_time(tmp_path: Path) -> None:
    from agent_fleet.changes.fastimport import Commit, write_commits

    repo, base, planned = _changes(tmp_path, 3)
    ref = "refs/heads/chain"
    steps = [
        Commit(
            key=p.session_id,
            ref=ref,
            parent=planned[i - 1].session_id if i else base,
            message=f"m{i}\n",
            files=p.change.files,
        )
        for i, p in enumerate(planned)
    ]
    together = write_commits(repo, steps, IDENT)
    alone: dict[str, str] = {}
    for step in steps:  # each in its own stream, on top of the commit id the previous one got
        parent = alone.get(step.parent, step.parent)
        alone |= write_commits(
            repo,
            [Commit(key=step.key, ref="refs/heads/alone", parent=parent, message=step.message, files=step.files)],
            IDENT,
        )
    assert together == alone
    assert git(repo, "rev-parse", "chain") == together[planned[-1].session_id]
    parents = git(repo, "log", "--format=%P", f"{base}..chain").splitlines()
    assert parents == [together[planned[1].session_id], together[planned[0].session_id], base]
    assert git(repo, "diff", "--name-only", base, "chain").splitlines() == ["pkg/m0.py", "pkg/m1.py", "pkg/m2.py"]
