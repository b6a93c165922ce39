"""``agent-fleet mcp`` driven by the official ``mcp`` client, over stdio and over streamable HTTP.

The server runs as its own process (``python -m agent_fleet.cli mcp``) with the simulated provider's
URL and a key in its environment: the client lists the tools, deploys a fleet without waiting, polls
``status`` until the run completes, pages through ``results`` to the end, reads ``events``, the report
resource and ``review``; a budget pause is raised through ``budget_raise`` and the run completes. No
answer ever holds the key.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.types import TextContent

from agent_fleet.sim.provider import SimConfig, sim_provider_process
from agent_fleet.testing.processes import stop

KEY = "sk-mcp-test-" + "3b9f" * 5
TOOLS = {"deploy", "status", "results", "events", "budget_raise", "review"}


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.02)) as url:
        yield url


def server_env(workdir: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY=KEY, FLEET_STORE=f"sqlite:///{workdir / 'fleet.db'}")
    return env


def write_items(workdir: Path, n: int) -> Path:
    path = workdir / "items.txt"
    path.write_text("".join(f"ticket {i}: the {w} page crashes on save\n" for i, w in enumerate(_words(n))))
    return path


def _words(n: int) -> list[str]:
    base = ["billing", "profile", "search", "export", "upload", "login", "report", "settings", "admin", "cart"]
    return [f"{base[i % len(base)]}-{i}" for i in range(n)]


async def call(session: ClientSession, tool: str, **args: Any) -> Any:
    result = await session.call_tool(tool, args)
    (content,) = result.content
    assert isinstance(content, TextContent)
    assert KEY not in content.text
    assert not result.isError, content.text
    return json.loads(content.text)  # JSON text content


async def deploy_to_the_end(session: ClientSession, workdir: Path) -> None:
    listed = await session.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    deploy = next(t for t in listed.tools if t.name == "deploy")
    assert set(deploy.inputSchema["properties"]) == {
        "task",
        "input",
        "agents",
        "budget_tokens",
        "wait",
        "queue",
        "priority",
    }

    started = await call(session, "deploy", task="Classify each ticket", input=str(write_items(workdir, 30)), agents=3)
    run_id = started["run_id"]
    assert started["status"] == "running"
    deadline = time.monotonic() + 120
    while (status := await call(session, "status", run_id=run_id))["status"] in ("running", "created"):
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.2)
    assert status["status"] == "completed" and status["sessions"]["completed"] == 3
    total = status["results_unique"]
    pages, offset = [], 0
    while True:
        page = await call(session, "results", run_id=run_id, offset=offset, limit=7)
        assert page["total"] == total
        if not page["results"]:
            break
        pages += page["results"]
        offset += len(page["results"])
    assert len(pages) == total > 0 and len({r["id"] for r in pages}) == total
    assert (workdir / ".fleet" / "runs" / run_id / "results.jsonl").read_text().count("\n") == total
    session_id = pages[0]["session_id"]
    events = await call(session, "events", session_id=session_id)
    assert events["events"][0]["type"] == "session_created"
    later = await call(session, "events", session_id=session_id, after=2)
    assert [e["seq"] for e in later["events"]] == [e["seq"] for e in events["events"][2:]]
    report = await session.read_resource(f"fleet://runs/{run_id}/report.md")  # type: ignore[arg-type]
    text = report.contents[0].text  # type: ignore[union-attr]
    assert run_id in text and KEY not in text
    # nothing paused or out of attempts: what the queue holds is what the verifier refuted or was unsure of
    left = (await call(session, "review", run_id=run_id))["items"]
    assert {i["kind"] for i in left} <= {"refuted", "unsure"}
    assert len(left) == status["verification"]["refuted"] + status["verification"]["unsure"]


def test_over_stdio_the_client_deploys_and_reads_a_run_to_the_end(sim_url: str, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_fleet.cli", "mcp", "--embedder", "lexical"],
        env=server_env(tmp_path, sim_url),
        cwd=tmp_path,
    )

    async def go() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await deploy_to_the_end(session, tmp_path)

    asyncio.run(go())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_server(workdir: Path, url: str) -> AsyncIterator[str]:
    port = free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once; the test reads its stderr line by line)
        [sys.executable, "-m", "agent_fleet.cli", "mcp", "--http", "--port", str(port), "--embedder", "lexical"],
        cwd=workdir,
        env=server_env(workdir, url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "MCP server at" in line, line + (proc.stderr.read() if proc.poll() is not None else "")
        endpoint = line.split("MCP server at", 1)[1].strip()
        for _ in range(200):  # the URL is announced before uvicorn listens
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.05)
        yield endpoint
    finally:
        _, err = stop(proc, timeout=30)
        assert KEY not in (err or "")


async def test_over_streamable_http_the_client_deploys_and_reads_a_run_to_the_end(sim_url: str, tmp_path: Path) -> None:
    async with (
        http_server(tmp_path, sim_url) as endpoint,
        streamablehttp_client(endpoint) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await deploy_to_the_end(session, tmp_path)


async def test_a_budget_pause_is_raised_over_mcp_and_the_run_completes(sim_url: str, tmp_path: Path) -> None:
    async with (
        http_server(tmp_path, sim_url) as endpoint,
        streamablehttp_client(endpoint) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        items = str(write_items(tmp_path, 12))
        paused = await call(session, "deploy", task="Classify", input=items, agents=2, budget_tokens=300, wait=True)
        run_id = paused["run_id"]
        assert paused["status"] == "paused" and paused["summary"]["sessions"]["paused"] == 2
        queue = (await call(session, "review"))["items"]
        assert {(i["kind"], i["status"]) for i in queue} == {("paused", "open")} and len(queue) == 2
        raised = await call(session, "budget_raise", run_id=run_id, tokens=1_000_000)
        assert raised["data"]["tokens"] == 1_000_000 and raised["resumed"] is True
        deadline = time.monotonic() + 120
        while (status := await call(session, "status", run_id=run_id))["status"] != "completed":
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.2)
        assert status["sessions"]["completed"] == 2
        # the pauses are resolved; what is left is what the verifier refuted or was unsure of
        left = (await call(session, "review", run_id=run_id))["items"]
        assert {i["kind"] for i in left} <= {"refuted", "unsure"}
        assert len(left) == status["verification"]["refuted"] + status["verification"]["unsure"]


async def test_bad_requests_are_tool_errors_and_the_server_goes_on(sim_url: str, tmp_path: Path) -> None:
    async with (
        http_server(tmp_path, sim_url) as endpoint,
        streamablehttp_client(endpoint) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        missing = await session.call_tool("deploy", {"task": "t", "input": str(tmp_path / "nope.txt")})
        assert missing.isError and "nope.txt" in missing.content[0].text  # type: ignore[union-attr]
        unknown = await session.call_tool("status", {"run_id": "run-unknown"})
        assert unknown.isError and "no run" in unknown.content[0].text  # type: ignore[union-attr]
        bad = await session.call_tool("budget_raise", {"run_id": "run-unknown"})
        assert bad.isError
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS


# -- Claude Code ----------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[3]


def claude_program() -> str:
    path = os.environ.get("FLEET_TEST_CLAUDE") or str(REPO / ".ci-tools" / "npm" / "node_modules" / ".bin" / "claude")
    if not os.access(path, os.X_OK):
        msg = f"{path} is not installed (bash .ci/install-agent-clis installs it)"
        if os.environ.get("FLEET_REQUIRE_REAL_CLIS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def test_claude_code_lists_the_fleet_tools_with_mcp_config(sim_url: str, tmp_path: Path) -> None:
    """The real Claude Code, offline: ``-p`` against the simulated provider with ``--mcp-config``;
    its init message names the servers it connected and the tools it offers the model."""
    claude = claude_program()
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": ["-m", "agent_fleet.cli", "mcp"], "env": server_env(tmp_path, sim_url)}
    config.write_text(json.dumps({"mcpServers": {"fleet": server}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        ANTHROPIC_BASE_URL=sim_url.removesuffix("/v1"),
        ANTHROPIC_API_KEY="sk-claude-code-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        MCP_TIMEOUT="120000",  # the server's start-up, in milliseconds (a loaded machine imports slowly)
    )
    args = ["-p", "Which fleet tools do you have?", "--mcp-config", str(config), "--strict-mcp-config"]
    proc = subprocess.run(
        [claude, *args, "--output-format", "stream-json", "--verbose"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    messages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    init = next((m for m in messages if m.get("type") == "system" and m.get("subtype") == "init"), None)
    assert init is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert {"name": "fleet", "status": "connected"}.items() <= init["mcp_servers"][0].items(), init["mcp_servers"]
    assert {t.removeprefix("mcp__fleet__") for t in init["tools"] if t.startswith("mcp__fleet__")} == TOOLS
    assert KEY not in proc.stdout + proc.stderr
