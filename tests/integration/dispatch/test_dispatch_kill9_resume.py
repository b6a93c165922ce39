"""A real run with sandboxes on git worktrees and an MCP server, killed with SIGKILL mid-run, then
``agent-fleet resume``: the resumed run completes, and afterwards no sandbox process, worktree or
MCP server process is left over.

Two kinds of sessions hold sandboxes when the engine dies:

* ``harness``: the built-in agent with fleet.yaml ``hands: {files: sandbox}`` — its file tools read
  inside the session's own worktree (bubblewrap when available);
* ``cli``: ``--agent-cmd`` agents in plain sandboxes (no namespace dies with the engine), each
  leaving a process that escaped its process group: only the reaper can find it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _hands_support import git_repo, have_bwrap, worktrees

from agent_fleet.hands import isolation
from agent_fleet.sim.provider import LogNormalLatency, SimConfig, sim_provider_process

# A kill test: a process is killed and its leftovers checked; selected with -m slow, bounded on its own.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

MCP_SERVER = Path(__file__).parents[1] / "_mcp_server.py"
FILES = 12
SOURCE = "def handler_{i}(data):\n    try:\n        return eval(data)\n    except:\n        return None\n"
# A jsonl agent in plain shell: one result per item, slowly, plus a straggler outside its group.
SLOW_AGENT = (
    "setsid sleep 600 >/dev/null 2>&1 & "
    'while read -r f; do sleep 1; printf \'{"title": "reviewed %s", "body": "ok"}\\n\' "$f"; done < "$FLEET_PARTITION"'
)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=LogNormalLatency(median=0.4, sigma=0.2), seed=2)) as url:
        yield url


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-kill9-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def env_for(workdir: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY="sk-kill9-test-key", FLEET_STORE=f"sqlite:///{workdir / 'f.db'}")
    return env


def fleet(workdir: Path, url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agent_fleet.cli", *args],
        cwd=workdir,
        env=env_for(workdir, url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def owned(owners: set[str]) -> list[tuple[int, dict[str, str]]]:
    """Marked processes (sandboxed commands, MCP servers) started by one of these engines."""
    return [(pid, m) for pid, m in isolation.scan_marked() if m.get(isolation.OWNER_VAR) in owners]


def mcp_servers(owners: set[str]) -> list[int]:
    """MCP server processes of these engines (they carry the owner marker, not a sandbox id)."""
    return [pid for pid, m in owned(owners) if isolation.SANDBOX_VAR not in m]


def token_of(proc: subprocess.Popen[str]) -> str:
    """The owner token of a running engine (pid and start time), read before it dies."""
    token = isolation.owner_token(proc.pid)
    assert not token.endswith(":0"), "the engine process is already gone"
    return token


def wait_for(check: Callable[[], object], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for the run to hold sandboxes")


@pytest.mark.parametrize("kind", ["harness", "cli"])
def test_kill9_mid_run_then_resume_leaves_nothing(kind: str, workdir: Path, sim_url: str) -> None:
    if kind == "harness" and not have_bwrap():
        pytest.skip("bubblewrap is not available here")
    pytest.importorskip("mcp")
    repo = git_repo(workdir / "repo", {f"src/mod_{i:02d}.py": SOURCE.format(i=i) for i in range(FILES)})
    root = workdir / "sandboxes"
    hands = "files: sandbox, isolation: bwrap" if kind == "harness" else "isolation: plain"
    (workdir / "fleet.yaml").write_text(
        f"mcp_servers: {{demo: {{command: {sys.executable}, args: [{MCP_SERVER}]}}}}\n"
        f"hands: {{{hands}, sandbox_root: {root}, tools: {{directory: [demo__add]}}}}\n"
        "dispatch: {workers: 4}\n"
    )
    args = ["deploy", "--task", "Review", "--input", str(repo), "--agents", str(FILES)]
    args += ["--config", str(workdir / "fleet.yaml"), "--embedder", "lexical", "--json"]
    if kind == "cli":
        args += ["--agent-cmd", SLOW_AGENT]
    proc = fleet(workdir, sim_url, *args)
    try:
        killed = token_of(proc)
        wait_for(lambda: any(root.glob("*/sbx-*/work")) and mcp_servers({killed}), 60)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    (run_dir,) = list(root.iterdir())
    run_id = run_dir.name
    left = list(run_dir.glob("sbx-*"))
    assert left, "the engine held no sandbox when it was killed"
    assert len(worktrees(repo)) > 1  # positive control: the kill left worktrees behind
    if kind == "cli":  # positive control: in plain sandboxes the stragglers outlive the engine
        assert [pid for pid, m in owned({killed}) if isolation.SANDBOX_VAR in m]

    resumed = fleet(workdir, sim_url, "resume", run_id, "--json")
    engines = {killed, token_of(resumed)}
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err
    summary = json.loads(out)
    assert summary["status"] == "completed" and summary["sessions"]["completed"] == FILES
    assert summary["results_raw"] == (2 * FILES if kind == "harness" else FILES)

    assert worktrees(repo) == [str(repo.resolve())]
    assert not root.exists() or list(root.iterdir()) == []
    assert mcp_servers(engines) == []
    assert owned(engines) == []
