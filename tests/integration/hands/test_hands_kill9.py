"""After the engine is killed with kill -9, the reaper leaves no sandbox process, worktree or
MCP server process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hands_support import MODES, git_repo, have_bwrap, owner_pids, sandbox_root, worktrees

from agent_fleet.hands.reaper import Reaper

CHILD = Path(__file__).with_name("_engine_child.py")
MCP_SERVER = Path(__file__).parents[1] / "_mcp_server.py"


@pytest.fixture
def root() -> Iterator[Path]:
    with sandbox_root() as r:
        yield r


def start_engine(
    mode: str, root: Path, repo: Path, with_mcp: bool, shim: str = "default"
) -> tuple[subprocess.Popen[str], str, str]:
    argv = [sys.executable, str(CHILD), "hold", mode, str(root), str(repo)]
    if with_mcp:
        argv.append(str(MCP_SERVER))
    env = {**os.environ, "FLEET_TEST_SHIM": shim}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise AssertionError(f"engine did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    _, owner, sandbox_id = line.split()
    return proc, owner, sandbox_id


def wait_gone(owner: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = owner_pids(owner)
        if not left:
            return []
        time.sleep(0.1)
    return owner_pids(owner)


def stop(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe:
            pipe.close()


def leaders(owner: str, parent: int) -> list[int]:
    """The engine's direct sandboxed children: each command's first process."""
    out = []
    for pid in owner_pids(owner):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            out.append(pid)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("shim", ["default", "python"])
@pytest.mark.parametrize("mode", MODES)
def test_a_sandbox_dies_with_its_engine(mode: str, shim: str, root: Path, tmp_path: Path) -> None:
    """The parent-death kill: no reaper runs here, yet the command the engine started is gone."""
    if mode == "bwrap" and not have_bwrap():
        pytest.skip("bubblewrap is not available here")
    repo = git_repo(tmp_path / "repo", {"main.py": "print('hi')\n"})
    proc, owner, _ = start_engine(mode, root, repo, with_mcp=False, shim=shim)
    try:
        first = leaders(owner, proc.pid)
        assert len(first) == 1, "one command, one first process"
    finally:
        stop(proc)
    deadline = time.monotonic() + 5.0
    while alive(first[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(first[0])
    Reaper(root).reap(live_session_ids=set())
    assert wait_gone(owner) == []


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("with_mcp", [False, True])
def test_kill9_then_reap_leaves_nothing(mode: str, with_mcp: bool, root: Path, tmp_path: Path) -> None:
    if mode == "bwrap" and not have_bwrap():
        pytest.skip("bubblewrap is not available here")
    if with_mcp:
        pytest.importorskip("mcp")
    repo = git_repo(tmp_path / "repo", {"main.py": "print('hi')\n"})
    proc, owner, sandbox_id = start_engine(mode, root, repo, with_mcp)
    try:
        assert owner_pids(owner), "the engine should have marked processes running"
        assert (root / sandbox_id / "work" / "main.py").exists()
        assert len(worktrees(repo)) == 2
    finally:
        stop(proc)
    report = Reaper(root).reap(live_session_ids=set())
    assert sandbox_id in report.sandboxes
    if mode == "plain":  # no namespace died with the engine: the reaper itself killed the leftovers
        assert report.processes
    assert report.worktrees == [str(root / sandbox_id / "work")]
    assert wait_gone(owner) == []
    assert os.listdir(root) == []
    assert worktrees(repo) == [str(repo.resolve())]
    assert Reaper(root).reap(live_session_ids=set()).empty  # nothing left the second time


def test_reaper_spares_live_owners_and_live_sessions(root: Path) -> None:
    from agent_fleet.hands import isolation
    from agent_fleet.hands.workspace import create_workspace

    me = isolation.owner_token()
    other_live = isolation.owner_token(os.getppid())
    for sid, session, owner in [
        ("sbx-mine-live", "s1", me),
        ("sbx-mine-ended", "s2", me),
        ("sbx-other-live", "s3", other_live),
        ("sbx-dead-owner", "s4", "999999999:1"),
    ]:
        create_workspace(root, sandbox_id=sid, session_id=session, owner=owner)
    assert Reaper(root).reap().sandboxes == ["sbx-dead-owner"]  # no live set: keep all of mine
    report = Reaper(root).reap(live_session_ids={"s1"})
    assert report.sandboxes == ["sbx-mine-ended"]
    assert sorted(os.listdir(root)) == ["sbx-mine-live", "sbx-other-live"]


def test_two_engines_reaping_at_once_both_succeed(tmp_path: Path) -> None:
    """Two engines on one machine start together and reap the same dead engine's sandboxes: each
    removal the other got to first is no error, and nothing is left."""
    from concurrent.futures import ThreadPoolExecutor

    from agent_fleet.engine.workforce import reap_sandboxes
    from agent_fleet.hands.workspace import create_workspace

    base = tmp_path / "sandboxes"
    for r in range(4):
        for i in range(25):
            create_workspace(base / f"run-{r}", sandbox_id=f"sbx-{r}-{i:02d}", session_id=f"s{i}", owner="999999999:1")
    with ThreadPoolExecutor(max_workers=4) as pool:
        reports = list(pool.map(lambda _: reap_sandboxes(base), range(4)))
    removed = sorted(s for r in reports for s in r.sandboxes)
    assert removed == sorted(f"sbx-{r}-{i:02d}" for r in range(4) for i in range(25))  # each once, by one
    assert not any(base.iterdir())  # every sandbox and every emptied run directory is gone
