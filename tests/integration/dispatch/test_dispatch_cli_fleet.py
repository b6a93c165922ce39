"""CLI agents as fleet members, end to end through ``deploy --agent-cmd``.

A fleet of 24 scripted CLI agents (Codex's JSONL events; real OpenAI SDK calls), two waves of 12
workers, runs through the run's own gateway service with per-session tokens. Every call is metered
per session and recorded in the session log, so the run summary equals the log and the gateway's
meter, and equals what each CLI itself reports; a token budget stops the sessions with big
partitions (they pause), a raise sends them back in and the spend before the pause still counts.
Then the CLI itself: ``agent-fleet deploy --agent-cmd ... --agent-format claude`` (Anthropic SDK
calls translated by the gateway), and a CLI that hangs is killed at its hard timeout and reassigned
to another worker until its attempts run out.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from _hands_support import have_bwrap, owner_pids

from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.engine import Engine, RunOptions, deploy, exit_code_for, resume
from agent_fleet.hands import isolation
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, SimProvider, sim_provider_process
from agent_fleet.testing.cli_standins import standin_command

pytestmark = pytest.mark.skipif(
    not have_bwrap() and os.geteuid() == 0,
    reason="without bubblewrap, root drops sandboxes to nobody, who cannot run this Python",
)

KEY = "sk-cli-fleet-" + "9c1e" * 6
# A long item's call costs over 1,000 tokens: its session crosses the cap within two calls and is
# refused the third; a short one's three calls stay far below it.
BUDGET = 1500
AGENTS = 24


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-cli-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def write_config(root: Path, workers: int) -> Path:
    config = root / "fleet.yaml"
    config.write_text(f"hands: {{sandbox_root: {root / 'sandboxes'}}}\ndispatch: {{workers: {workers}}}\n")
    return config


def long_item(i: int) -> bool:
    return i % 5 == 2


def by_session(events: list[Event]) -> dict[str, list[Event]]:
    """Events of the agent sessions (the aggregate phase's own model calls, e.g. a verifier's, are
    in the run's log too, under other ids)."""
    out: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if ".s" in e.session_id:
            out[e.session_id].append(e)
    return out


def metered(events: list[Event]) -> tuple[Usage, Decimal, int]:
    usage, cost, calls = Usage(), Decimal(0), 0
    for e in events:
        if e.type == EventType.MODEL_RESPONSE:
            r = ChatResponse.from_dict(e.data["response"])
            usage, cost, calls = usage + r.usage, cost + r.cost_usd, calls + 1
    return usage, cost, calls


async def test_a_cli_fleet_is_metered_per_session_and_stopped_by_budgets(workdir: Path) -> None:
    # 24 agents (each one a Python process importing the OpenAI SDK, about 2.5 s of CPU); the fleet of
    # 50 through the gateway service is tests/integration/hands/test_hands_cli_gateway.py.
    items = workdir / "items.txt"
    items.write_text("".join(f"item {i}: " + ("x" * 4000 if long_item(i) else "short") + "\n" for i in range(AGENTS)))
    store = f"sqlite:///{workdir / 'fleet.db'}"
    engines: list[Engine] = []
    async with SimProvider(SimConfig(latency=0.01)) as sim:
        options = RunOptions(
            task="Review each item",
            input_path=str(items),
            agents=AGENTS,
            budget_tokens=BUDGET,
            provider=sim.base_url,
            out_dir=str(workdir / "out"),
            config_path=str(write_config(workdir, workers=12)),
            embedder="lexical",
            agent_cmd=standin_command("codex", "--calls 3"),
            agent_format="codex",
        )
        report = await deploy(options, store_url=store, api_key=KEY, on_start=lambda _r, e: engines.append(e))
        run_id = report.run_id
        async with open_store(store) as log:
            events = await log.events_of_run(run_id)
            states = {r.session_id: r.state for r in await log.list_sessions(run_id)}
        gateway = engines[0].gateway

        assert report.status == "paused" and exit_code_for(report.status) == 3
        sessions = by_session(events)
        assert len(sessions) == AGENTS
        spent_calls: dict[str, int] = {}
        for sid, evs in sessions.items():
            index = int(sid.rsplit(".s", 1)[1])
            usage, cost, calls = metered(evs)
            tally = gateway.session_usage(sid)  # the gateway's own meter, per session
            assert (usage.input_tokens, usage.output_tokens, cost, calls) == (
                tally.input_tokens,
                tally.output_tokens,
                tally.cost_usd,
                tally.calls,
            )
            assert cost > 0
            results = [e.data for e in evs if e.type == EventType.RESULT_ITEM]
            spent_calls[sid] = calls
            if long_item(index):  # the budget stopped it before its last call
                assert states[sid] is SessionState.PAUSED and 1 <= calls < 3 and results == []
                paused = [e.data for e in evs if e.type == EventType.SESSION_PAUSED]
                assert paused[-1]["reason"] == "budget"
                last = ChatResponse.from_dict(
                    [e for e in evs if e.type == EventType.MODEL_RESPONSE][-1].data["response"]
                ).usage.total_tokens
                assert usage.total_tokens - last < BUDGET <= usage.total_tokens  # the crossing call finished
            else:
                assert states[sid] is SessionState.COMPLETED and calls == 3
                assert [r["location"] for r in results] == [f"item {index}: short"]
                done = next(e.data for e in evs if e.type == EventType.SESSION_COMPLETED)
                reported = Usage.from_dict(done["reported"]["usage"])  # what the CLI printed itself
                assert (reported.input_tokens, reported.output_tokens) == (usage.input_tokens, usage.output_tokens)
        total, total_cost, total_calls = metered(events)
        summary = report.summary
        assert summary["llm_calls"] == total_calls == gateway.meter.run.calls
        assert summary["tokens"]["total"] == total.total_tokens == gateway.meter.run.total_tokens
        assert Decimal(summary["cost_usd_exact"]) == total_cost == gateway.meter.run.cost_usd
        assert KEY not in json.dumps([e.to_dict() for e in events])
        assert owner_pids(isolation.owner_token()) == []
        assert list((workdir / "sandboxes").iterdir()) == []

        # raise the budget: the paused sessions run again, and what they spent before still counts
        async with open_store(store) as log:
            await log.emit_event(run_id, EventType.BUDGET_RAISED, {"tokens": 100_000})
        again = await resume(run_id, store_url=store, api_key=KEY)
    assert again.status == "completed"
    async with open_store(store) as log:
        events = await log.events_of_run(run_id)
        # the report's own checking calls (a verifier) are recorded in the run's stream
        verifier = [e.data for e in await log.get_events(run_id) if e.type == EventType.VERIFICATION]
    for sid, evs in by_session(events).items():
        index = int(sid.rsplit(".s", 1)[1])
        # a paused session ran its command again: three more calls on top of what it had spent
        assert metered(evs)[2] == (spent_calls[sid] + 3 if long_item(index) else 3)
        assert len([e for e in evs if e.type == EventType.RESULT_ITEM]) == 1
    assert again.summary["llm_calls"] == metered(events)[2] + sum(int(v.get("calls", 0)) for v in verifier)
    assert list((workdir / "sandboxes").iterdir()) == []


def sandboxed_under(root: Path) -> list[int]:
    """Sandboxed processes still working in a directory under ``root``."""
    found = []
    for pid, marks in isolation.scan_marked():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone meanwhile
        if isolation.SANDBOX_VAR in marks and cwd.startswith(str(root)):
            found.append(pid)
    return found


async def agent_calls(workdir: Path, run_id: str) -> dict[str, int]:
    """Recorded model calls per agent session."""
    async with open_store(f"sqlite:///{workdir / 'fleet.db'}") as log:
        events = await log.events_of_run(run_id, [EventType.MODEL_RESPONSE])
    return {sid: metered(evs)[2] for sid, evs in by_session(events).items()}


def cli(*args: str, cwd: Path, url: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY=KEY, FLEET_STORE=f"sqlite:///{cwd / 'fleet.db'}")
    return subprocess.run(
        [sys.executable, "-m", "agent_fleet.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        yield url


def test_deploy_agent_cmd_from_the_command_line(workdir: Path, sim_url: str) -> None:
    items = workdir / "items.txt"
    items.write_text("".join(f"line {i}\n" for i in range(4)))
    proc = cli(
        "deploy",
        "--task",
        "Review",
        "--input",
        str(items),
        "--agents",
        "4",
        "--config",
        str(write_config(workdir, workers=4)),
        "--agent-cmd",
        standin_command("claude", "--calls 2", "--model claude-sonnet-4-5"),
        "--agent-format",
        "claude",
        "--embedder",
        "lexical",
        "--json",
        cwd=workdir,
        url=sim_url,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["sessions"]["completed"] == 4 and summary["results_raw"] == 4
    assert summary["llm_calls"] >= 8 and summary["tokens"]["total"] > 0  # 2 per agent, and the report's
    calls = asyncio.run(agent_calls(workdir, summary["run_id"]))
    assert calls == dict.fromkeys(calls, 2) and len(calls) == 4
    assert KEY not in proc.stdout + proc.stderr

    bad = cli(
        "deploy",
        "--task",
        "x",
        "--input",
        str(items),
        "--agent-cmd",
        "true",
        "--agent-format",
        "yaml",
        cwd=workdir,
        url=sim_url,
    )
    assert bad.returncode == 2 and "--agent-format" in bad.stderr and "Traceback" not in bad.stderr


def test_a_hanging_cli_is_killed_at_its_timeout_and_reassigned(workdir: Path, sim_url: str) -> None:
    items = workdir / "items.txt"
    items.write_text("a\nb\n")
    proc = cli(
        "deploy",
        "--task",
        "Review",
        "--input",
        str(items),
        "--agents",
        "2",
        "--timeout",
        "8",
        "--config",
        str(write_config(workdir, workers=8)),
        "--agent-cmd",
        standin_command("jsonl", "--hang"),
        "--embedder",
        "lexical",
        "--json",
        cwd=workdir,
        url=sim_url,
    )
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["sessions"]["failed"] == 2
    assert (
        summary["errors"]["timeout"] == 6
    )  # three attempts per session, each killed at 8 s (a loaded machine takes seconds to start it)
    # the one call each attempt made before hanging still counts
    sessions = [session_id_for(summary["run_id"], i) for i in range(2)]
    assert asyncio.run(agent_calls(workdir, summary["run_id"])) == dict.fromkeys(sessions, 3)

    async def failures() -> dict[str, list[dict[str, object]]]:
        async with open_store(f"sqlite:///{workdir / 'fleet.db'}") as log:
            events = await log.events_of_run(summary["run_id"], [EventType.ATTEMPT_FAILED])
        out: dict[str, list[dict[str, object]]] = defaultdict(list)
        for e in events:
            out[e.session_id].append(e.data)
        return out

    for attempts in asyncio.run(failures()).values():
        assert [a["kind"] for a in attempts] == ["timeout"] * 3
        assert len({a["worker"] for a in attempts}) == 3  # each time on another worker
    assert list((workdir / "sandboxes").iterdir()) == []
    assert sandboxed_under(workdir) == []
