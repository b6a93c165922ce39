from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import ConfigError
from agent_fleet.hands.composite import CompositeHands
from agent_fleet.hands.mcp_pool import McpPool, McpServerConfig
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.hands.toolbox import Toolbox

MCP_SERVER = str(Path(__file__).parents[1] / "_mcp_server.py")


def part(kind: InputKind, items: tuple[str, ...], tools: tuple[str, ...] = ()) -> Partition:
    return Partition(
        id="p0001", index=1, kind=kind, items=items, item_ids=tuple(range(len(items))), est_tokens=1, tools=tools
    )


def names(hands: object) -> list[str]:
    assert isinstance(hands, CompositeHands)
    return [s.name for s in hands.specs()]


async def test_defaults_by_input_kind(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    provider = LocalSandboxProvider(SandboxConfig(root=tmp_path / "sbx", use_bwrap=False))
    box = Toolbox(run_id="run-1", input_root=tmp_path, sandboxes=provider)
    code = box.hands_for(part(InputKind.DIRECTORY, ("a.py",)))
    assert names(code) == ["read_file", "list_files", "grep", "run_command"]
    assert (await code.execute("read_file", {"path": "a.py"})).output == "x = 1\n"
    assert not (tmp_path / "sbx").exists()  # no sandbox until run_command is called
    await code.aclose()
    urls = box.hands_for(part(InputKind.LIST, ("https://a.example/x", "http://b.example/")))
    assert names(urls) == ["fetch_url"]
    plain = box.hands_for(part(InputKind.LIST, ("just a line",)))
    assert names(plain) == []
    no_shell = Toolbox(run_id="run-1", input_root=tmp_path)
    assert names(no_shell.hands_for(part(InputKind.DIRECTORY, ("a.py",)))) == ["read_file", "list_files", "grep"]


async def test_partition_tools_pick_exactly_that_toolset(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    async with McpPool([McpServerConfig(name="demo", command=sys.executable, args=(MCP_SERVER,))]) as pool:
        box = Toolbox(run_id="run-1", mcp=pool)
        hands = box.hands_for(part(InputKind.LIST, ("https://a.example/",), tools=("fetch_url", "demo__add")))
        assert names(hands) == ["fetch_url", "demo__add"]
        out = await hands.execute("demo__add", {"a": 1, "b": 2})
        assert out.output == "3"
        assert (await hands.execute("demo__server_pid", {})).is_error
    with pytest.raises(ConfigError, match="none are configured"):
        Toolbox(run_id="r").hands_for(part(InputKind.LIST, ("x",), tools=("github",)))
    with pytest.raises(ConfigError, match="sandbox provider"):
        Toolbox(run_id="r", input_root=tmp_path).hands_for(part(InputKind.DIRECTORY, ("a",), tools=("run_command",)))
