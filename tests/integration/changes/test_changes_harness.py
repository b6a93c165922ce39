"""The built-in harness records a session's change with its completion: real hands (``run_command`` in
a sandbox that is a worktree of the run's base), real git, a scripted model. The change is captured
before the workspace is removed, lands in the same append as ``session_completed``, and a session
woken again after it completed records nothing more."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _hands_support import have_bwrap, sandbox_root

from agent_fleet.brain.harness import Harness, Outcome
from agent_fleet.changes import RunChanges, find_base
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.hands.toolbox import Toolbox
from agent_fleet.session import SessionLog, open_store
from agent_fleet.session.tap import ForwardingLog
from agent_fleet.testing.fakes import FakeGateway

pytestmark = pytest.mark.skipif(
    not have_bwrap() and os.geteuid() == 0,
    reason="without bubblewrap, root drops sandboxes to nobody",
)


class CountingLog(ForwardingLog):
    """Records each append as the list of event types it wrote together."""

    def __init__(self, inner: SessionLog) -> None:
        super().__init__(inner)
        self.appends: list[list[str]] = []

    async def emit_events(self, session_id, events):  # type: ignore[no-untyped-def]
        self.appends.append([t for t, _ in events])
        return await super().emit_events(session_id, events)


def script(request: ChatRequest) -> ChatResponse:
    turn = sum(1 for m in request.messages if m["role"] == "assistant") + 1
    if turn == 1:
        edit = ToolCall("c1", "run_command", json.dumps({"command": "printf 'z = 3\\n' >> sub/a.py"}))
        return ChatResponse(None, (edit,), Usage(10, 5))
    return ChatResponse(None, (ToolCall("c2", "finish", json.dumps({"summary": "edited"})),), Usage(10, 5))


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    store = open_store(f"sqlite:///{tmp_path / 'fleet.db'}")
    await store.open()
    yield store
    await store.close()


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=cwd, capture_output=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.decode().strip()


async def test_the_harness_records_the_change_with_its_completion(log: SessionLog, tmp_path: Path) -> None:
    with sandbox_root() as root:
        repo = root / "repo"
        (repo / "top" / "sub").mkdir(parents=True)
        (repo / "top/sub/a.py").write_text("x = 1\n")
        (repo / "top/b.py").write_text("y = 2\n")
        git(root, "init", "-q", str(repo))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "base")
        (repo / "top/b.py").write_text("y = 20\n")  # the user's uncommitted edit is not the session's base
        base = find_base(repo / "top")
        assert base is not None and base.dirty and base.prefix == "top/"
        changes = RunChanges.of(base)
        provider = LocalSandboxProvider(SandboxConfig(root=root / "sandboxes"))
        toolbox = Toolbox(
            run_id="run-x", input_root=repo / "top", sandboxes=provider, resources=ResourceSpec(), changes=changes
        )
        p = Partition("p0000", 0, InputKind.DIRECTORY, ("sub/a.py",), (0,), 10, tools=("run_command",))
        sid = "run-x.s00000"
        info = {"run_id": "run-x", "partition": p.to_dict(), "task": "Edit", "model": "m", "max_tokens": 100}
        await log.emit_event(sid, EventType.SESSION_CREATED, info)
        counting = CountingLog(log)
        hands = toolbox.hands_for(p)
        try:
            out = await Harness(log=counting, gateway=FakeGateway(lambda _s, r: script(r)), hands=hands).run(sid)
        finally:
            await hands.aclose()
        assert out.outcome is Outcome.COMPLETED
        assert counting.appends[-1][-2:] == [EventType.CHANGE, EventType.SESSION_COMPLETED]  # one append
        change = [e.data for e in await log.get_events(sid) if e.type == EventType.CHANGE]
        assert len(change) == 1
        assert [f["path"] for f in change[0]["files"]] == ["top/sub/a.py"] and change[0]["out_of_scope"] == []
        assert change[0]["base"] == base.commit and "+z = 3" in change[0]["patch"]
        assert list((root / "sandboxes").iterdir()) == []  # the workspace is gone, its change kept
        assert git(repo, "worktree", "list").count("\n") == 0
        again = await Harness(log=log, gateway=FakeGateway(lambda _s, r: script(r)), hands=toolbox.hands_for(p)).run(
            sid
        )
        assert again.outcome is Outcome.COMPLETED
        assert sum(1 for e in await log.get_events(sid) if e.type == EventType.CHANGE) == 1  # never twice
