"""A run that makes changes, end to end: the built-in agent edits its own worktree through the simulated
provider, and an attempt lost mid-session leaves the next attempt the same edits.

decompose → dispatch → harness → gateway → the simulated provider (edits on) over loopback HTTP;
write_file/edit_file in per-session git worktrees. Each worktree's files are read as its sandbox
closes. Every session's worktree must end holding exactly the mechanical fixes of its own files (and
nothing else changed), captured once as the session's change and merged into the run's branch; a run
whose first attempt of each session crashes after its second edit must end with the same worktrees
and the same branch; the user's working tree, HEAD and branch are as they were.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from _hands_support import Snapshots, git_repo, have_bwrap

from agent_fleet.config import load_config
from agent_fleet.dispatch.port import Lease
from agent_fleet.domain.events import Event, EventType
from agent_fleet.engine import Engine, RunOptions, plan_run, with_config
from agent_fleet.engine.workforce import Workforce
from agent_fleet.session import open_store
from agent_fleet.session.port import ForwardingLog, SessionLog
from agent_fleet.sim.detectors import detect
from agent_fleet.sim.fixes import apply_edits, plan_edits
from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.port import ModelGateway
from agent_fleet.spend.providers import build_provider
from agent_fleet.testing.faults import InjectedCrash

SESSIONS = 4
SOURCE = """import yaml


def load_{i}(text, seen=[]):
    try:
        return yaml.load(text) == None
    except:
        return None


def check_{i}(x):
    if x != None:
        return x
    return 0
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-edits-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def files_of(top: Path) -> dict[str, bytes]:
    """Every file of the working tree under ``top`` by path (the .git directory aside: runs add branches)."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(top))] = p.read_bytes()
    return out


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


class CrashAfterEdits:
    """Each session's first attempt crashes as it records the result of its second edit (``at="edit"``:
    the first edit is in its log, the second was made in the worktree that dies with the attempt), or
    as it records its finish (``at="finish"``: every edit is in its log, and the next attempt makes no
    tool call of its own before its change is read)."""

    def __init__(self, at: str) -> None:
        self.at = at
        self.crashed: set[str] = set()

    def __call__(self, lease: Lease, log: SessionLog, gateway: ModelGateway) -> tuple[SessionLog, ModelGateway]:
        return _CrashingLog(log, self), gateway


class _CrashingLog(ForwardingLog):
    def __init__(self, inner: SessionLog, owner: CrashAfterEdits) -> None:
        super().__init__(inner)
        self._owner = owner
        self._edits: Counter[str] = Counter()

    def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Awaitable[Event]:
        if type == EventType.TOOL_RESULT and data is not None and data.get("name") == "edit_file":
            self._edits[session_id] += 1
            if self._edits[session_id] == 2 and self._owner.at == "edit":
                self._crash(session_id)
        return self.inner.emit_event(session_id, type, data)

    def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> Awaitable[list[Event]]:
        finishing = any(t == EventType.TOOL_RESULT and d.get("name") == "finish" for t, d in events)
        if finishing and self._owner.at == "finish":
            self._crash(session_id)
        return self.inner.emit_events(session_id, events)

    def _crash(self, session_id: str) -> None:
        if session_id not in self._owner.crashed:
            self._owner.crashed.add(session_id)
            raise InjectedCrash(f"{session_id}: the worker died (injected)")


async def run_fleet(root: Path, name: str, sim_url: str, *, crash: CrashAfterEdits | None) -> tuple[Any, ...]:
    config = root / f"{name}.yaml"
    config.write_text(
        f"hands: {{sandbox_root: {root / 'sandboxes'}}}\n"
        "dispatch: {workers: 8, check_interval_s: 0.1, hung_after_s: 5, breaker_cooldown_s: 600}\n"
    )
    options = RunOptions(
        task="Fix what you find",
        input_path=str(root / "repo"),
        agents=SESSIONS,
        provider=sim_url,
        out_dir=str(root / name),
        config_path=str(config),
        embedder="lexical",
    )
    options = with_config(options, load_config(config))
    plan = plan_run(options)
    assert len(plan.partitions) == SESSIONS
    assert all(p.tools[-3:] == ("write_file", "edit_file", "run") for p in plan.partitions)  # recorded in the plan
    log = open_store(f"sqlite:///{root / name}.db")
    await log.open()
    run_id = f"run-{name}"
    provider = build_provider(sim_url, api_key="sk-edits-test", model=options.model)
    gateway = Gateway(provider, concurrency=16, session_tokens=options.budget_tokens, run_id=run_id)
    snaps: list[Snapshots] = []

    def wrap(inner: Any) -> Any:
        snaps.append(Snapshots(inner))
        return snaps[-1]

    workforce = await Workforce.open(
        run_id=run_id, config_path=str(config), gateway=gateway, log=log, interpose=crash, wrap_sandboxes=wrap
    )
    engine = Engine(log=log, gateway=gateway, workforce=workforce)
    try:
        await engine.create_run(plan, options, run_id=run_id)
        await engine.dispatch(run_id, plan, options)
        report = await engine.aggregate(run_id, options)
        events = await log.events_of_run(run_id)
    finally:
        await engine.shutdown()
    (snap,) = snaps
    return report, events, snap.at_close, plan


@pytest.mark.skipif(not have_bwrap() and os.geteuid() == 0, reason="plain sandboxes as root run as nobody")
async def test_sessions_edit_their_worktrees_and_a_lost_attempt_loses_no_edit(workdir: Path) -> None:
    sources = {f"pkg/mod_{i}.py": SOURCE.format(i=i) for i in range(2 * SESSIONS)}
    repo = git_repo(workdir / "repo", sources)
    before = files_of(repo), git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD")
    fixed = {p: apply_edits(t, plan_edits(p, t, detect(p, t))) for p, t in sources.items()}
    assert all(fixed[p] not in (None, sources[p]) for p in sources)
    crashes = {"edit": CrashAfterEdits("edit"), "finish": CrashAfterEdits("finish")}
    async with SimProvider(SimConfig(latency=0.01, edits=True)) as sim:
        runs = [await run_fleet(workdir, "clean", sim.base_url, crash=None)]
        for at, crash in crashes.items():
            runs.append(await run_fleet(workdir, f"lost-at-{at}", sim.base_url, crash=crash))

    for report, events, at_close, plan in runs:
        assert report.status == "completed" and report.summary["sessions"]["completed"] == SESSIONS
        assert len(at_close) == SESSIONS
        for part in plan.partitions:
            sid = f"{report.run_id}.s{part.index:05d}"
            # its own files hold exactly their fixes; every other file is as it was
            want = {p: (fixed[p] if p in part.items else sources[p]) for p in sources}
            assert at_close[sid] == want, sid
        edits = [e for e in events if e.type == EventType.TOOL_RESULT and e.data["name"] == "edit_file"]
        assert edits and not [e for e in edits if e.data["is_error"]]
        # each session's change recorded once; the run's branch holds every fix
        changes = Counter(e.session_id for e in events if e.type == EventType.CHANGE)
        assert sorted(changes.values()) == [1] * SESSIONS, report.run_id
        for path in sources:
            assert git(repo, "show", f"fleet/{report.run_id}:{path}") == fixed[path], (report.run_id, path)
    # the faulty runs lost every session's first attempt, and ended as the clean one did
    for (_, events, _, _), crash in zip(runs[1:], crashes.values(), strict=True):
        assert len(crash.crashed) == SESSIONS
        failed = [e for e in events if e.type == EventType.ATTEMPT_FAILED]
        assert len(failed) == SESSIONS and {e.data["kind"] for e in failed} == {"crash"}
    assert (files_of(repo), git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD")) == before
    assert git(repo, "status", "--porcelain") == ""
