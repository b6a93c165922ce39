"""Coding agents deliver code, end to end through the real CLI (SPEC.md "Changes").

A 20-partition run over a generated git repository (a small package whose tests pass), each session a
CLI agent (``--agent-cmd``, a shell command) that edits the files of its partition, one of them also
writing a file outside its partition: every session's change is recorded once, ``fleet/RUN_ID`` holds
exactly the in-scope ones, the out-of-scope one stays on its own branch and in the review queue, and
the user's branch, HEAD, index and working tree are byte-identical afterwards. Then kill -9 in the
middle of the run and in the middle of merging, and ``resume``: the run's branch has the same tree as
an uninterrupted run's, and the commit an uninterrupted merge of the same log gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.changes import Change, Identity, Planned, RunBase, integrate
from agent_fleet.domain.events import EventType
from agent_fleet.hands import isolation
from agent_fleet.session import open_store

from .conftest import Cli

pytestmark = pytest.mark.skipif(
    isolation.bwrap_path() is None and os.geteuid() == 0,
    reason="without bubblewrap, root drops sandboxes to nobody, who cannot write the worktree's files",
)

AGENTS = 20
STRAY = 7  # the session that also writes outside its partition
# Each session appends a line to every Python file of its partition; session STRAY also writes a file
# no partition holds. A sleep makes the run long enough to be killed in the middle.
EDIT = (
    'sleep "${FLEET_TEST_SLEEP:-0}"; '
    'while read p; do case "$p" in *.py) printf "\\n# reviewed\\n" >> "$p";; esac; done < "$FLEET_PARTITION"; '
    f'case "$FLEET_SESSION_ID" in *s{STRAY:05d}) echo "not mine" > OUTSIDE.md;; esac'
)


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env, check=True)
    return out.stdout.decode().strip()


def has_object(repo: Path, sha: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", sha], cwd=repo, capture_output=True).returncode == 0


def make_package(root: Path) -> Path:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg/__init__.py").write_text('"""A small package."""\n')
    for i in range(AGENTS):
        (repo / f"pkg/mod{i:02d}.py").write_text(f"def value{i}() -> int:\n    return {i}\n")
        (repo / f"tests/test_mod{i:02d}.py").write_text(
            f"from pkg.mod{i:02d} import value{i}\n\n\ndef test_value{i}() -> None:\n    assert value{i}() == {i}\n"
        )
    git(root, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-q", "-m", "the package")
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo, check=True, capture_output=True
    )
    return repo


def checkout_state(repo: Path) -> dict[str, str]:
    state = {
        "HEAD": (repo / ".git/HEAD").read_text(),
        "head": git(repo, "rev-parse", "HEAD"),
        "index": hashlib.sha256((repo / ".git/index").read_bytes()).hexdigest(),
        "stash": git(repo, "stash", "list"),
    }
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            state[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return state


def deploy_args(repo: Path, config: Path) -> tuple[str, ...]:
    return (
        "--task",
        "Review each module",
        "--input",
        str(repo),
        "--agents",
        str(AGENTS),
        "--agent-cmd",
        EDIT,
        "--config",
        str(config),
        "--embedder",
        "lexical",
    )


def write_config(tmp_path: Path, workers: int) -> Path:
    config = tmp_path / f"fleet-{workers}.yaml"
    config.write_text(f"dispatch: {{workers: {workers}}}\n")
    return config


async def last_events(store: str, run_id: str) -> dict[str, tuple[int, str]]:
    """Each session's last event: its seq and type."""
    async with open_store(store) as log:
        return {
            r.session_id: (r.last_seq, (await log.get_events(r.session_id))[-1].type)
            for r in await log.list_sessions(run_id)
        }


async def change_events(store: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    async with open_store(store) as log:
        events = await log.events_of_run(run_id, [EventType.CHANGE])
    out: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        out.setdefault(e.session_id, []).append(e.data)
    return out


def test_a_coding_fleet_keeps_every_change_and_merges_the_in_scope_ones(cli: Cli, tmp_path: Path) -> None:
    repo = make_package(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    before = checkout_state(repo)
    code, summary = cli.json("deploy", *deploy_args(repo, write_config(tmp_path, AGENTS)))
    assert code == 0, summary
    run_id = summary["run_id"]
    block = summary["changes"]
    assert block["sessions_with_changes"] == AGENTS and block["out_of_scope"] == 1
    assert block["merged"] == AGENTS - 1 and block["branch"] == f"fleet/{run_id}"

    # one change per session, recorded once
    recorded = asyncio.run(change_events(cli.store, run_id))
    assert len(recorded) == AGENTS and all(len(v) == 1 for v in recorded.values())

    code, listing = cli.json("changes", run_id)
    assert code == 0 and listing["base"] == base and listing["branch"] == f"fleet/{run_id}"
    rows = {r["session_id"]: r for r in listing["changes"]}
    stray = rows[f"{run_id}.s{STRAY:05d}"]
    assert stray["out_of_scope"] == ["OUTSIDE.md"] and not stray["merged"] and "OUTSIDE.md" in stray["reason"]
    assert all(r["merged"] and r["reason"] is None for sid, r in rows.items() if sid != stray["session_id"])
    for r in listing["changes"]:
        assert set(r) >= {"session_id", "partition_id", "branch", "files", "insertions", "deletions"}
        assert set(r) >= {"out_of_scope", "check", "merged", "reason"} and r["check"] is None

    # fleet/RUN_ID holds exactly the in-scope changes; the stray one stays on its own branch
    edited = sorted(f for sid, r in rows.items() if sid != stray["session_id"] for f in r["files"])
    assert git(repo, "diff", "--name-only", base, f"fleet/{run_id}").splitlines() == edited
    assert "OUTSIDE.md" in git(repo, "ls-tree", "--name-only", stray["branch"]).splitlines()
    every = sorted(git(repo, "ls-files", "*.py").splitlines())  # each Python file edited once, by its own session
    assert sorted([*edited, *(f for f in stray["files"] if f != "OUTSIDE.md")]) == every

    # the out-of-scope change is in the review queue with its path
    code, review = cli.json("review", run_id)
    items = [i for i in review["items"] if i["kind"] == "out_of_scope"]
    assert [(i["subject"], i["detail"]["paths"]) for i in items] == [(stray["session_id"], ["OUTSIDE.md"])]

    # the report lists each change; the user's checkout is exactly as it was
    report = (Path(summary["out_dir"]) / "report.md").read_text()
    assert "## Changes" in report and "OUTSIDE.md" in report and f"fleet/{run_id}.p" in report
    assert checkout_state(repo) == before

    # apply, only when asked: the package's tests still pass with the merged changes
    done = cli.run("apply", run_id)
    assert done.returncode == 0, done.stderr
    assert git(repo, "diff", "--name-only", base, "HEAD").splitlines() == edited
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo, check=True, capture_output=True
    )
    dirty = cli.run("apply", run_id)
    assert dirty.returncode == 0  # already applied: nothing to merge


def test_input_outside_a_repository_records_no_changes_and_says_so(cli: Cli, tmp_path: Path) -> None:
    src = tmp_path / "plain"
    src.mkdir()
    for i in range(3):
        (src / f"m{i}.py").write_text(f"x = {i}\n")
    code, summary = cli.json("deploy", "--task", "t", "--input", str(src), "--agents", "3", "--embedder", "lexical")
    assert code == 0 and summary["changes"]["sessions_with_changes"] == 0 and summary["changes"]["branch"] is None
    shown = cli.run("changes", summary["run_id"])
    assert shown.returncode == 0 and "not captured" in shown.stdout
    refused = cli.run("apply", summary["run_id"])
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "not captured" in refused.stderr


# -- kill -9 ------------------------------------------------------------------------------------------

_SLOW_MERGE = """#!{python}
import os, subprocess, sys, time
real = {real!r}
if "fast-import" in sys.argv:
    stream = sys.stdin.buffer.read()
    if b"\\nmerge " in stream:  # the run's branch is being merged: say so (with this pid), and stall
        with open({marker!r} + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace({marker!r} + ".tmp", {marker!r})
        time.sleep(60)
    sys.exit(subprocess.run([real, *sys.argv[1:]], input=stream).returncode)
os.execv(real, [real, *sys.argv[1:]])
"""


async def _started(proc: subprocess.Popen[str]) -> str:
    """The run id from the line that announces it (warnings, e.g. on the checkout, may come first)."""
    assert proc.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(120):
        while True:
            line = await asyncio.to_thread(proc.stderr.readline)
            assert line, f"the run ended before it started: {seen}"
            if line.startswith("agent-fleet: run "):
                return line.split()[2]
            seen.append(line)


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


async def _recorded_changes(store: str, run_id: str) -> tuple[RunBase, list[tuple[str, str, Change]]]:
    from agent_fleet.engine.changes import load_base, recorded
    from agent_fleet.engine.records import load_run

    async with open_store(store) as log:
        _, plan = await load_run(log, run_id)
        base = await load_base(log, run_id)
        assert base is not None
        return base, recorded(plan, run_id, await log.events_of_run(run_id, [EventType.CHANGE]))


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_kill9_mid_run_and_mid_merge_then_resume_gives_the_uninterrupted_branch(cli: Cli, tmp_path: Path) -> None:
    repo = make_package(tmp_path)
    config = write_config(tmp_path, 4)  # four sessions at a time: a run long enough to be killed in
    args = deploy_args(repo, config)
    code, clean = cli.json("deploy", *args)
    assert code == 0, clean
    clean_tree = git(repo, "rev-parse", f"fleet/{clean['run_id']}^{{tree}}")
    before = checkout_state(repo)

    # kill -9 while sessions run: some changes recorded, others in flight
    store = f"sqlite:///{tmp_path / 'crash.db'}"
    proc = cli.popen("deploy", *args, "--json", FLEET_STORE=store, FLEET_TEST_SLEEP="0.4")
    run_id = await _started(proc)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        n = len(await change_events(store, run_id))
        if n >= 4 or proc.poll() is not None:
            break
        await asyncio.sleep(0.1)
    assert proc.poll() is None and 4 <= n < AGENTS, n
    _kill(proc)
    done_before = await last_events(store, run_id)  # the sessions that had completed when it was killed
    done_before = {sid: seq for sid, (seq, kind) in done_before.items() if kind == EventType.SESSION_COMPLETED}

    # resume, and kill -9 again while the run's branch is being merged
    bin_dir, marker = tmp_path / "bin", tmp_path / "merging"
    bin_dir.mkdir()
    real = shutil.which("git")
    assert real is not None
    (bin_dir / "git").write_text(_SLOW_MERGE.format(python=sys.executable, real=real, marker=str(marker)))
    (bin_dir / "git").chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    proc = cli.popen("resume", run_id, "--json", FLEET_STORE=store, PATH=path)
    assert await _started(proc) == run_id
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        await asyncio.sleep(0.05)
    if not marker.exists():
        _kill(proc)
        raise AssertionError(f"the merge was not reached: {proc.stderr.read() if proc.stderr else ''}")
    _kill(proc)
    await asyncio.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, ValueError):
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the stalled merge the killed engine left

    code, final = cli.json("resume", run_id, FLEET_STORE=store)
    assert code == 0 and final["status"] == "completed", final
    recorded = await change_events(store, run_id)
    assert len(recorded) == AGENTS and all(len(v) == 1 for v in recorded.values())  # none lost, none twice
    after = await last_events(store, run_id)
    assert done_before and all(after[sid][0] == seq for sid, seq in done_before.items())  # none of them ran again
    tip = git(repo, "rev-parse", f"fleet/{run_id}")
    assert git(repo, "rev-parse", f"{tip}^{{tree}}") == clean_tree
    # each session's branch holds the same change as the uninterrupted run's
    for i in range(AGENTS):
        pid = f"p{i:04d}"
        ours = git(repo, "rev-parse", f"fleet/{run_id}.{pid}^{{tree}}")
        assert ours == git(repo, "rev-parse", f"fleet/{clean['run_id']}.{pid}^{{tree}}")
    # and the commit is the one an uninterrupted merge of the same log makes, in a clone of its own
    twin = tmp_path / "twin"
    git(tmp_path, "clone", "-q", "--no-local", "--no-checkout", str(repo), str(twin))
    for ref in git(twin, "for-each-ref", "--format=%(refname)", "refs/remotes").splitlines():
        git(twin, "update-ref", "-d", ref)
    base, changes = await _recorded_changes(store, run_id)
    blocked = {sid: "outside" for sid, _, ch in changes if ch.out_of_scope}
    planned = [Planned(sid, pid, ch, blocked.get(sid)) for sid, pid, ch in changes]
    again = integrate(
        twin,
        run_id=run_id,
        base=base.commit,
        identity=Identity(when=base.when),
        task="Review each module",
        planned=planned,
    )
    assert again.commit == tip
    assert checkout_state(repo) == before
    assert json.dumps(final["changes"]) == json.dumps({**clean["changes"], "branch": f"fleet/{run_id}"})


def test_a_dirty_checkout_still_bases_on_head_and_says_so(cli: Cli, tmp_path: Path) -> None:
    repo = make_package(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    (repo / "pkg/mod00.py").write_text("def value0() -> int:\n    return 'uncommitted'\n")
    before = checkout_state(repo)
    args = ("--task", "Review", "--input", str(repo), "--agents", "2", "--agent-cmd", EDIT, "--embedder", "lexical")
    done = cli.run("deploy", *args, "--config", str(write_config(tmp_path, 2)), "--json")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "uncommitted changes" in line]
    assert len(said) == 1 and base[:12] in said[0] and "bases on HEAD" in said[0]
    run_id = json.loads(done.stdout)["run_id"]
    # the sessions worked on HEAD: the uncommitted text is in no change
    assert "uncommitted" not in git(repo, "diff", base, f"fleet/{run_id}")
    assert checkout_state(repo) == before
    refused = cli.run("apply", run_id)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "uncommitted changes" in refused.stderr and checkout_state(repo) == before


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_base_commit_that_disappeared_stops_resume_in_one_line_and_loses_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    repo = make_package(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    store = f"sqlite:///{tmp_path / 'gone.db'}"
    args = deploy_args(repo, write_config(tmp_path, 2))
    proc = cli.popen("deploy", *args, "--json", FLEET_STORE=store, FLEET_TEST_SLEEP="0.5")
    run_id = await _started(proc)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not await change_events(store, run_id) and proc.poll() is None:
        await asyncio.sleep(0.1)
    _kill(proc)
    recorded = await change_events(store, run_id)
    assert recorded  # some changes were recorded before the kill
    # the user rewrites history: the base is in no branch, no reflog, no object any more
    for ref in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/fleet").splitlines():
        git(repo, "update-ref", "-d", ref)
    for line in git(repo, "worktree", "list", "--porcelain").splitlines()[1:]:  # what the killed engine left
        if line.startswith("worktree "):
            git(repo, "worktree", "remove", "--force", line.removeprefix("worktree "))
    git(repo, "checkout", "-q", "--orphan", "rewritten")
    git(repo, "-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-q", "-m", "rewritten")
    git(repo, "branch", "-D", "main")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert not has_object(repo, base)

    refused = cli.run("resume", run_id, FLEET_STORE=store)
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and base[:12] in lines[0] and "no longer in" in lines[0] and "Traceback" not in refused.stderr
    )
    shown = cli.run("changes", run_id, "--json", FLEET_STORE=store)  # nothing lost: the log still has them
    assert shown.returncode == 0
    listed = json.loads(shown.stdout)
    assert {c["session_id"] for c in listed["changes"]} == set(recorded)
