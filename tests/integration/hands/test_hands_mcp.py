from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agent_fleet.errors import ConfigError
from agent_fleet.hands.mcp_pool import McpError, McpPool, McpServerConfig

SERVER = str(Path(__file__).parents[1] / "_mcp_server.py")
TOKEN = "demo-credential-7f3a9c1e55"


def stdio(**kw: Any) -> McpServerConfig:
    return McpServerConfig(name="demo", command=sys.executable, args=(SERVER,), **kw)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


@pytest.fixture
async def pool(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[McpPool]:
    monkeypatch.setenv("FLEET_TEST_DEMO_TOKEN", TOKEN)
    async with McpPool([stdio(env={"DEMO_TOKEN": "${FLEET_TEST_DEMO_TOKEN}"})]) as p:
        yield p


async def test_partitions_see_only_their_tools_and_share_one_server(pool: McpPool) -> None:
    assert [t.name for t in pool.tools()] == ["add", "fail", "server_pid", "token_is_set"]
    adder = pool.toolset(["demo__add"])
    everything = pool.toolset(["demo"])
    assert [s.name for s in adder.specs()] == ["demo__add"]
    assert adder.specs()[0].parameters["required"] == ["a", "b"]
    assert len(everything.specs()) == 4
    out = await adder.execute("demo__add", {"a": 2, "b": 3})
    assert (out.output, out.is_error) == ("5", False)
    denied = await adder.execute("demo__server_pid", {})
    assert denied.is_error and "unknown tool" in denied.output
    pids = {(await pool.toolset(["demo__server_pid"]).execute("demo__server_pid", {})).output for _ in range(3)}
    assert len(pids) == 1  # one shared server process, not one per agent
    sums = await asyncio.gather(*(adder.execute("demo__add", {"a": i, "b": i}) for i in range(20)))
    assert [s.output for s in sums] == [str(2 * i) for i in range(20)]
    assert pool.statistics()["demo"] == {"connections": 1, "ready": 1, "in_flight": 0, "tools": 4}
    failing = await everything.execute("demo__fail", {})
    assert failing.is_error and "always fails" in failing.output


async def test_credentials_stay_in_the_pool(pool: McpPool) -> None:
    hands = pool.toolset(["demo"])
    assert (await hands.execute("demo__token_is_set", {})).output == "yes"
    assert TOKEN not in repr(hands.specs()) and TOKEN not in repr(pool)
    assert TOKEN not in repr(stdio(env={"DEMO_TOKEN": TOKEN}))


async def test_close_stops_the_server_process(monkeypatch: pytest.MonkeyPatch) -> None:
    async with McpPool([stdio(connections=2)]) as p:
        pid = int((await p.call("demo", "server_pid", {})).output)
        assert alive(pid)
        assert p.statistics()["demo"]["ready"] == 2
    await asyncio.sleep(0.2)
    assert not alive(pid)
    out = await p.call("demo", "add", {"a": 1, "b": 1})
    assert out.is_error


async def test_the_pool_opened_in_one_task_closes_from_another() -> None:
    pool = McpPool([stdio()])

    async def opener() -> int:
        await pool.start()
        return int((await pool.call("demo", "server_pid", {})).output)

    pid = await asyncio.create_task(opener())  # that task has ended; the pool lives on
    assert alive(pid) and (await pool.call("demo", "add", {"a": 2, "b": 3})).output == "5"
    await asyncio.create_task(pool.aclose())  # and yet another task closes it
    for _ in range(50):
        if not alive(pid):
            break
        await asyncio.sleep(0.05)
    assert not alive(pid)
    await pool.aclose()  # twice is fine
    assert (await pool.call("demo", "add", {"a": 1, "b": 1})).is_error


async def test_dead_server_is_reconnected(pool: McpPool) -> None:
    pid = int((await pool.call("demo", "server_pid", {})).output)
    os.kill(pid, 9)
    new_pid = None
    for _ in range(100):
        out = await pool.call("demo", "server_pid", {})
        if not out.is_error and int(out.output) != pid:
            new_pid = int(out.output)
            break
        await asyncio.sleep(0.1)
    assert new_pid is not None and alive(new_pid)


async def test_bad_configs_fail_with_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_TEST_MISSING", raising=False)
    with pytest.raises(McpError, match=r"demo: .*FLEET_TEST_MISSING"):
        await McpPool([stdio(env={"X": "${FLEET_TEST_MISSING}"})]).start()
    bad = McpServerConfig(name="nothere", command="/nonexistent/mcp-server", start_timeout=5)
    with pytest.raises(McpError, match="nothere"):
        await McpPool([bad]).start()
    with pytest.raises(ConfigError):
        McpServerConfig(name="a__b", command="x")
    with pytest.raises(ConfigError):
        McpServerConfig(name="x")
    with pytest.raises(ConfigError, match="unknown keys"):
        McpServerConfig.from_mapping("x", {"command": "y", "secret": 1})
    cfg = McpServerConfig.from_mapping("gh", {"url": "http://127.0.0.1:1/mcp", "headers": {"A": "b"}})
    assert cfg.url == "http://127.0.0.1:1/mcp" and cfg.headers == {"A": "b"}
    async with McpPool([stdio()]) as p:
        with pytest.raises(ConfigError, match="not configured"):
            p.toolset(["github"])
        with pytest.raises(ConfigError, match="no tool"):
            p.toolset(["demo__nope"])


async def test_streamable_http_server_gets_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("web")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    inner = server.streamable_http_app()
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            seen.append(headers.get(b"authorization", b"").decode())
        await inner(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    monkeypatch.setenv("FLEET_TEST_HTTP_TOKEN", TOKEN)
    cfg = McpServerConfig(
        name="web", url=f"http://127.0.0.1:{port}/mcp", headers={"Authorization": "Bearer ${FLEET_TEST_HTTP_TOKEN}"}
    )
    async with asyncio.TaskGroup() as tg:
        serving = tg.create_task(uv.serve(sockets=[sock]))
        while not uv.started:
            await asyncio.sleep(0.02)
        try:
            async with McpPool([cfg]) as p:
                out = await p.toolset(["web"]).execute("web__add", {"a": 3, "b": 4})
                assert (out.output, out.is_error) == ("7", False)
        finally:
            uv.should_exit = True
        await serving
    assert seen and set(seen) == {f"Bearer {TOKEN}"}
