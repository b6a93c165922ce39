"""A run's hands as the engine builds them (fleet.yaml → Workforce): the minimal toolset per
partition, sandboxes created only on the first tool call that needs one, file tools inside the
session's sandbox surviving a sandbox that dies mid-read, one shared MCP pool, and nothing left
after close."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hands_support import have_bwrap

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.engine.workforce import Workforce
from agent_fleet.hands.composite import CompositeHands
from agent_fleet.hands.sandbox import LocalSandboxProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import build_provider
from agent_fleet.testing.faults import FaultySandboxes

MCP_SERVER = Path(__file__).parents[1] / "_mcp_server.py"


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-hands-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def part(kind: InputKind, items: tuple[str, ...], tools: tuple[str, ...] = ()) -> Partition:
    return Partition(
        id="p0003", index=3, kind=kind, items=items, item_ids=tuple(range(len(items))), est_tokens=1, tools=tools
    )


def names(hands: Any) -> list[str]:
    assert isinstance(hands, CompositeHands)
    return [s.name for s in hands.specs()]


class FirstRunsDie(FaultySandboxes):
    """The first ``n`` commands find their sandbox dying under them."""

    def __init__(self, inner: LocalSandboxProvider, n: int) -> None:
        super().__init__(inner, rate=0.0)
        self.left = n

    def doomed(self, session_id: str) -> bool:
        self.left -= 1
        return self.left >= 0


async def open_workforce(workdir: Path, yaml: str, **kw: Any) -> Workforce:
    config = workdir / "fleet.yaml"
    config.write_text(f"hands: {{sandbox_root: {workdir / 'sbx'}{yaml}}}\n" + kw.pop("extra", ""))
    gateway = Gateway(build_provider("http://127.0.0.1:9/v1", api_key="sk-unused-in-this-test"))
    return await Workforce.open(run_id="run-h", config_path=str(config), gateway=gateway, log=None, **kw)  # type: ignore[arg-type]


async def test_minimal_toolsets_lazy_sandboxes_and_a_shared_mcp_pool(workdir: Path) -> None:
    if not have_bwrap() and os.geteuid() == 0:
        pytest.skip("plain sandboxes as root run as nobody; this test reads files the engine owns")
    pytest.importorskip("mcp")
    code = workdir / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "a.py").write_text("x = eval(input())\n")
    (code / "pkg" / "b.py").write_text("print('other partition')\n")
    mcp = f"mcp_servers: {{demo: {{command: {sys.executable}, args: [{MCP_SERVER}]}}}}\n"
    dying: list[FirstRunsDie] = []

    def wrap(inner: Any) -> Any:
        dying.append(FirstRunsDie(inner, 1))
        return dying[-1]

    wf = await open_workforce(
        workdir, ", files: sandbox, tools: {directory: [demo__add, demo__server_pid]}", extra=mcp, wrap_sandboxes=wrap
    )
    try:
        d = wf.hands_for(part(InputKind.DIRECTORY, ("pkg/a.py",), ("read_file", "list_files", "grep")), str(code))
        assert names(d) == ["read_file", "list_files", "grep", "demo__add", "demo__server_pid"]
        assert not (workdir / "sbx" / "run-h").exists() or not any((workdir / "sbx" / "run-h").iterdir())
        assert (await d.execute("list_files", {})).output == "pkg/a.py"
        assert dying[0].provisioned == 0  # no sandbox until a tool needs one
        out = await d.execute("read_file", {"path": "pkg/a.py"})  # its first sandbox dies mid-read
        assert (out.output, out.is_error) == ("x = eval(input())\n", False)
        assert (dying[0].killed, dying[0].provisioned) == (1, 2)
        assert (await d.execute("read_file", {"path": "pkg/b.py"})).is_error  # another partition's file
        assert (await d.execute("read_file", {"path": "../code/pkg/b.py"})).is_error
        assert (await d.execute("grep", {"pattern": "eval\\("})).output == "pkg/a.py:1: x = eval(input())"
        assert (await d.execute("demo__add", {"a": 2, "b": 3})).output == "5"
        assert len(list((workdir / "sbx" / "run-h").iterdir())) == 1  # one live sandbox per session
        await d.aclose()
        assert list((workdir / "sbx" / "run-h").iterdir()) == []

        urls = wf.hands_for(part(InputKind.LIST, ("https://a.example/x",), ("fetch_url",)), None)
        assert names(urls) == ["fetch_url"]  # the MCP tools were given to directory partitions only
        out = await urls.execute("fetch_url", {"url": "https://b.example/"})
        assert out.is_error and "not one of your partition's URLs" in out.output
        assert names(wf.hands_for(part(InputKind.LIST, ("a line",)), None)) == []
        # one server shared by every session's hands; each sees only the tools it was given
        one = wf.hands_for(part(InputKind.DIRECTORY, ("pkg/a.py",)), str(code))
        two = wf.hands_for(part(InputKind.DIRECTORY, ("pkg/b.py",)), str(code))
        pids = {(await h.execute("demo__server_pid", {})).output for h in (one, two)}
        assert len(pids) == 1 and pids.pop().isdigit()
        assert (await one.execute("demo__fail", {})).output == "error: unknown tool 'demo__fail'"
        await one.aclose()
        await two.aclose()
    finally:
        await wf.aclose()
    assert wf.mcp is not None and wf.mcp.statistics()["demo"]["ready"] == 0
    assert not (workdir / "sbx" / "run-h").exists()


async def test_a_sandbox_that_keeps_dying_is_an_error_the_model_sees(workdir: Path) -> None:
    if not have_bwrap() and os.geteuid() == 0:
        pytest.skip("plain sandboxes as root run as nobody; this test reads files the engine owns")
    code = workdir / "code"
    code.mkdir()
    (code / "a.py").write_text("pass\n")
    dying: list[FirstRunsDie] = []

    def wrap(inner: Any) -> Any:
        dying.append(FirstRunsDie(inner, 3))
        return dying[-1]

    wf = await open_workforce(workdir, ", files: sandbox", wrap_sandboxes=wrap)
    try:
        hands = wf.hands_for(part(InputKind.DIRECTORY, ("a.py",)), str(code))
        out = await hands.execute("read_file", {"path": "a.py"})
        assert out.is_error and "sandbox died" in out.output
        assert (dying[0].killed, dying[0].provisioned) == (3, 3)
        assert (await hands.execute("read_file", {"path": "a.py"})).output == "pass\n"  # the model retries
        await hands.aclose()
    finally:
        await wf.aclose()
    assert not (workdir / "sbx" / "run-h").exists()


async def test_without_configuration_the_spec_toolsets(workdir: Path) -> None:
    code = workdir / "code"
    code.mkdir()
    (code / "a.py").write_text("pass\n")
    wf = await open_workforce(workdir, "")
    try:
        assert wf.sandboxes is None and wf.mcp is None and wf.service is None
        d = wf.hands_for(part(InputKind.DIRECTORY, ("a.py",), ("read_file", "list_files", "grep")), str(code))
        assert names(d) == ["read_file", "list_files", "grep"]
        assert (await d.execute("read_file", {"path": "a.py"})).output == "pass\n"
        assert names(wf.hands_for(part(InputKind.LIST, ("http://x.example/a", "https://y.example/")), None)) == [
            "fetch_url"
        ]
        pool = wf.pool(10)
        assert len(pool.workers()) == 12  # one per session plus spares
    finally:
        await wf.aclose()
