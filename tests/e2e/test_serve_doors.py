"""Every door of ``agent-fleet serve`` refuses the same inputs and runs, before anything is recorded.

One server, two teams (default input folders ``inputs/alpha`` and ``inputs/beta``). Through each door —
``POST /v1/runs``, ``agent-fleet deploy --server``, the MCP tool of ``agent-fleet mcp --server`` and
the A2A agent — team alpha submits the server's store file, its output folder (with a report in it),
fleet.yaml, beta's folder and a file in it, and symbolic and hard links to each from its own folder:
every one is refused, and so is an unknown queue or priority class. The store records no run. A
server whose teams name a queue it does not have does not start (exit 2, one line).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from typer.testing import CliRunner

from agent_fleet.cli.app import build_app
from agent_fleet.session import open_store

from .test_serve import ADMIN, TOKEN_A, Served, provider, serve_process

__all__ = ["provider"]

FLEET_YAML = """
teams:
  alpha: {token_env: ALPHA_TOKEN}
  beta: {token_env: BETA_TOKEN}
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, provider: str) -> Iterator[Served]:
    cwd = Path(tmp_path_factory.mktemp("doors"))
    with serve_process(cwd, provider, FLEET_YAML) as s:
        report = cwd / ".fleet" / "runs" / "run-0000beta" / "report.md"  # beta's output, as a run leaves it
        report.parent.mkdir(parents=True)
        report.write_text("beta's confidential findings\n")
        (cwd / "inputs" / "beta" / "secret.txt").write_text("beta's customer list\n")
        alpha = cwd / "inputs" / "alpha"
        (alpha / "ok.txt").write_text("https://example.com/a\n")
        for name, target in (("store", "fleet.db"), ("outputs", ".fleet"), ("beta", "inputs/beta")):
            (alpha / f"link-{name}").symlink_to(cwd / target)
        os.link(cwd / "fleet.db", alpha / "hard-store.db")
        os.link(report, alpha / "hard-report.md")
        os.link(cwd / "inputs" / "beta" / "secret.txt", alpha / "hard-secret.txt")
        yield s


REFUSED = [
    "fleet.db",
    ".fleet",
    ".fleet/runs/run-0000beta/report.md",
    "fleet.yaml",
    "inputs/beta",
    "inputs/beta/secret.txt",
    "inputs/alpha/link-store",
    "inputs/alpha/link-outputs",
    "inputs/alpha/link-beta",
    "inputs/alpha/hard-store.db",
    "inputs/alpha/hard-report.md",
    "inputs/alpha/hard-secret.txt",
]
UNKNOWN = [{"queue": "nowhere"}, {"priority": "urgent"}]  # no such LocalQueue, no such WorkloadPriorityClass
TASK = "Summarise each page"


def _recorded_runs(served: Served) -> list[str]:
    async def read() -> list[str]:
        async with open_store(f"sqlite:///{served.store}") as log:
            return [r.session_id for r in await log.list_runs(limit=100)]

    return asyncio.run(read())


def test_rest_refuses_them_all(live: Served) -> None:
    with live.client(TOKEN_A) as alpha:
        for path in REFUSED:
            r = alpha.post("/v1/runs", json={"task": TASK, "input_path": path})
            assert r.status_code == 403, (path, r.text)
            assert r.json()["error"]["type"] == "forbidden" and "\n" not in r.json()["error"]["message"]
        for extra in UNKNOWN:
            r = alpha.post("/v1/runs", json={"task": TASK, "input_path": "inputs/alpha/ok.txt", **extra})
            assert 400 <= r.status_code < 500, (extra, r.text)
            assert "unknown --" in r.json()["error"]["message"]  # deploy's own words
        assert alpha.get("/v1/runs").json()["runs"] == []
    assert _recorded_runs(live) == []


def test_deploy_server_refuses_them_all(live: Served) -> None:
    """The command line's own code (``deploy --server``, in this process for speed; one real process
    below shows the exit code and the one line as a user sees them)."""
    runner = CliRunner()
    env = {"FLEET_SERVER": live.url, "FLEET_TOKEN": TOKEN_A}
    for args in (*(("--input", p) for p in REFUSED), ("--queue", "nowhere"), ("--priority", "urgent")):
        result = runner.invoke(build_app(), ["deploy", "--task", TASK, *args, "--detach"], env=env)
        assert result.exit_code == 2, (args, result.output, result.exception)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("agent-fleet: error: "), result.stderr
    sub_env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    cmd = [sys.executable, "-m", "agent_fleet.cli", "deploy", "--task", TASK, "--input", "fleet.db", "--detach"]
    proc = subprocess.run(cmd, cwd=live.cwd, env={**sub_env, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert _recorded_runs(live) == []


def test_the_mcp_tool_through_the_server_refuses_them_all(live: Served) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_SERVER=live.url, FLEET_TOKEN=TOKEN_A)
    params = StdioServerParameters(command=sys.executable, args=["-m", "agent_fleet.cli", "mcp"], env=env, cwd=live.cwd)

    async def go() -> list[tuple[dict[str, Any], bool, str]]:
        seen = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            calls: list[dict[str, Any]] = [{"task": TASK, "input": p} for p in REFUSED]
            calls += [{"task": TASK, "input": "inputs/alpha/ok.txt", **extra} for extra in UNKNOWN]
            for args in calls:
                result = await session.call_tool("deploy", args)
                seen.append((args, result.isError, result.content[0].text))  # type: ignore[union-attr]
        return seen

    for args, is_error, text in asyncio.run(go()):
        assert is_error, (args, text)
        assert "Traceback" not in text
    assert _recorded_runs(live) == []


def _a2a_send(client: httpx.Client, data: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": TASK}, {"data": data}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    r = client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
    assert r.status_code == 200, r.text
    task: dict[str, Any] = r.json()["result"]["task"]
    return task


def test_a2a_refuses_them_all(live: Served) -> None:
    pytest.importorskip("a2a")
    with live.client(TOKEN_A) as alpha:
        for data in [{"input_path": p} for p in REFUSED] + [
            {"input_path": "inputs/alpha/ok.txt", **u} for u in UNKNOWN
        ]:
            task = _a2a_send(alpha, data)
            assert task["status"]["state"] == "TASK_STATE_REJECTED", (data, task["status"])
    assert _recorded_runs(live) == []
    with live.client(ADMIN) as admin:
        assert admin.get("/v1/runs").json()["runs"] == []


def test_serve_refuses_a_team_queue_it_does_not_have(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text("teams:\n  alpha: {token_env: ALPHA_TOKEN, queues: [default/nowhere]}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(ALPHA_TOKEN=TOKEN_A, FLEET_API_KEY="sk-never-used", FLEET_BASE_URL="http://127.0.0.1:9/v1")
    cmd = [sys.executable, "-m", "agent_fleet.cli", "serve", "--port", "0", "--config", "fleet.yaml"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "teams.alpha.queues: no LocalQueue 'default/nowhere'" in proc.stderr
    assert not (tmp_path / ".fleet").exists()  # nothing opened, nothing recorded
