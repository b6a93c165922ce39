"""kill -9 at random points of a 200-session run, then resume — five times in a row.

The final results must equal an uninterrupted run's: no partition's result lost or recorded
twice, and the token figures the same (what was spent before each crash still counts).
``FLEET_KILL_TRIALS`` repeats the random-kill drill with that many seeds, and the three-crash drill
with half as many (default 1 each).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store

from .conftest import Cli, write_lines

# A kill test: a process is killed and its leftovers checked; selected with -m slow, bounded on its own.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TRIALS = int(os.environ.get("FLEET_KILL_TRIALS", "1"))


def _results(summary: dict[str, Any]) -> list[tuple[Any, ...]]:
    out = Path(summary["out_dir"]) / "results.jsonl"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return sorted((r["partition_id"], r["title"], r["body"], r["location"], len(r["duplicates"])) for r in rows)


async def _raw_per_partition(store: str, run_id: str) -> dict[str, list[str]]:
    async with open_store(store) as log:
        events = await log.events_of_run(run_id, [EventType.RESULT_ITEM])
    by_part: dict[str, list[str]] = {}
    for e in events:
        by_part.setdefault(e.data["partition_id"], []).append(e.data["body"])
    return by_part


def _sim_stats(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/sim/stats", timeout=5) as resp:
        stats: dict[str, Any] = json.loads(resp.read())
    return stats


def _billed(stats: dict[str, Any]) -> int:
    """The tokens the simulated provider has answered so far (what it would bill)."""
    return int(stats["tokens_in"]) + int(stats["tokens_out"])


def _sim_billed(base_url: str) -> int:
    return _billed(_sim_stats(base_url))


def _sim_answered(stats: dict[str, Any]) -> int:
    """The model calls the simulated provider has answered (200) so far, over every chat API."""
    chat = ("/v1/chat/completions", "/v1/messages", "/v1/responses")
    return sum(int(stats["requests"].get(path, {}).get("200", 0)) for path in chat)


async def _started(proc: subprocess.Popen[str]) -> str:
    """The run id, once the process has recorded (or resumed) its run: however long start-up takes."""
    assert proc.stderr is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
    words = line.split()
    assert line.startswith("agent-fleet: run ") and words[-1] in ("started", "resumed"), line
    return words[2]


async def _crash_five_times(
    cli: Cli,
    tmp_path: Path,
    args: tuple[str, ...],
    seed: int,
    *,
    at_least: int = 5,
    delay: tuple[float, float] = (0.3, 1.2),
) -> tuple[int, dict[str, Any], str]:
    """Deploy, kill -9 at a random moment of the run, resume, kill again … five kills, then resume to the end.

    Each kill comes a random delay after the process said its run started, so start-up time (long on a
    loaded machine) does not decide whether a kill lands before the run is recorded."""
    crash_store = f"sqlite:///{tmp_path / 'crash.db'}"
    rng = random.Random(seed)
    kills = 0
    proc = cli.popen("deploy", *args, "--out", str(tmp_path / "crashed"), "--json", FLEET_STORE=crash_store)
    run_id = await _started(proc)
    while kills < 5:
        await asyncio.sleep(rng.uniform(*delay))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        if kills == 1:
            _, runs = cli.json("status", FLEET_STORE=crash_store)
            assert [(r["run_id"], r["status"]) for r in runs["runs"]] == [(run_id, "interrupted")]
        if kills == 5:
            break
        proc = cli.popen("resume", run_id, "--json", FLEET_STORE=crash_store)
        assert await _started(proc) == run_id
    assert kills >= at_least, f"the run finished after {kills} kills: make it longer"
    if proc.poll() is None:
        proc.wait()
    code, final = cli.json("resume", run_id, FLEET_STORE=crash_store)
    return code, final, crash_store


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_kill9_five_times_then_resume_equals_uninterrupted(slow_cli: Cli, tmp_path: Path, trial: int) -> None:
    cli = slow_cli
    src = write_lines(tmp_path / "urls.txt", 2000)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", "200", "--embedder", "lexical")

    code, clean = cli.json("deploy", *args, "--out", str(tmp_path / "clean"))
    assert code == 0 and clean["status"] == "completed"
    code, final, crash_store = await _crash_five_times(cli, tmp_path, args, seed=20261130 + trial)

    assert code == 0, final
    assert final["status"] == "completed"

    # nothing lost, nothing twice
    assert final["results_raw"] == clean["results_raw"] == 2000
    assert final["results_unique"] == clean["results_unique"]
    assert _results(final) == _results(clean)
    raw = await _raw_per_partition(crash_store, final["run_id"])
    raw_clean = await _raw_per_partition(cli.store, clean["run_id"])
    assert len(raw) == 200 and {k: sorted(v) for k, v in raw.items()} == {k: sorted(v) for k, v in raw_clean.items()}
    # every answered call counted once; calls lost in a crash were re-sent and counted once
    assert final["llm_calls"] == clean["llm_calls"]
    assert final["tokens"]["total"] == clean["tokens"]["total"]


async def test_spend_before_each_crash_still_counts_against_the_budget(slow_cli: Cli, tmp_path: Path) -> None:
    """A budget that lets every session make its first call and refuses its second (the first call
    alone costs more than the 400-token cap). A resumed session that forgot what it had spent before
    the crash would be let through and finish: the crashed run would then differ."""
    src = write_lines(tmp_path / "urls.txt", 1000)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", "200", "--embedder", "lexical")
    budget = ("--budget-tokens", "400")
    cli = slow_cli

    code, clean = cli.json("deploy", *args, *budget, "--out", str(tmp_path / "clean"))
    assert code == 3 and clean["status"] == "paused"
    assert clean["sessions"]["paused"] == 200 and clean["llm_calls"] == 200
    before = _sim_billed(cli.base_url)
    code, final, crash_store = await _crash_five_times(
        cli, tmp_path, (*args, *budget), seed=7, at_least=2, delay=(0.05, 0.4)
    )
    billed = _sim_billed(cli.base_url) - before
    assert code == 3, final
    assert final["sessions"] == clean["sessions"]
    # a call in flight at a crash may have been answered and billed: it is charged at its reservation,
    # which crosses the cap, so its session sends nothing more
    assert final["llm_calls"] + final["llm_calls_resent"] >= clean["llm_calls"]
    assert final["tokens"]["total"] + final["tokens_resent"]["total"] >= billed > 0
    resent = 0
    async with open_store(crash_store) as log:
        for rec in await log.list_sessions(final["run_id"]):
            events = await log.get_events(rec.session_id)
            answered = [e for e in events if e.type == EventType.MODEL_RESPONSE]
            charged = [e for e in events if e.type == EventType.MODEL_RESENT]
            resent += len(charged)
            assert len(answered) <= 1 and len(answered) + len(charged) >= 1
            spent = sum(e.data["tokens"] for e in charged) + sum(
                e.data["response"]["usage"]["input_tokens"] + e.data["response"]["usage"]["output_tokens"]
                for e in answered
            )
            assert spent > 400  # the call that crossed the cap finished (or was charged); nothing after it
    assert resent == final["llm_calls_resent"]


async def test_sigterm_exits_130_and_the_run_resumes(slow_cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 400)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", "40", "--embedder", "lexical")
    proc = slow_cli.popen("deploy", *args)
    assert proc.stderr is not None
    # once the run is recorded (however long start-up takes on a loaded machine), mid-run
    started = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
    assert started.startswith("agent-fleet: run ") and started.rstrip().endswith(" started"), started
    await asyncio.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.splitlines()[-1] == "agent-fleet: interrupted (resumable)"
    code, runs = slow_cli.json("status")
    run = runs["runs"][0]
    assert run["status"] == "interrupted"
    code, final = slow_cli.json("resume", run["run_id"])
    assert code == 0 and final["results_raw"] == 400


async def _freeze_answer_kill(cli: Cli, proc: subprocess.Popen[str]) -> dict[str, Any]:
    """Wait for calls in flight, freeze the engine, let the provider answer every one of them, then
    kill -9; the provider's counters once it has answered them (nobody heard those answers)."""
    await asyncio.sleep(1.0)
    while _sim_stats(cli.base_url)["in_flight"] == 0:
        assert proc.poll() is None, "the run ended before a crash: make it longer"
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGSTOP)
    await asyncio.sleep(0.2)  # a request written just before the freeze reaches the provider
    stats = _sim_stats(cli.base_url)
    for _ in range(300):
        if stats["in_flight"] == 0:
            break
        await asyncio.sleep(0.05)
        stats = _sim_stats(cli.base_url)
    assert stats["in_flight"] == 0, stats  # every call that left the frozen engine has been answered
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return stats


@pytest.mark.parametrize("trial", range(max(1, TRIALS // 2)))
async def test_calls_answered_during_three_crashes_are_billed_and_bounded(
    slow_cli: Cli, tmp_path: Path, trial: int
) -> None:
    """Three times: freeze the engine with calls in flight, let the provider answer, kill -9, resume.
    The calls whose answers were lost are charged at their reservation: the summary's tokens plus
    tokens_resent cover what the provider billed, and no session passes its budget by more than a call."""
    cli = slow_cli
    cap = 12_000  # room for a few calls after a charged one: the run goes on past each crash
    src = write_lines(tmp_path / "urls.txt", 2000)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", "200", "--embedder", "lexical")
    store = f"sqlite:///{tmp_path / 'crash.db'}"
    before = _sim_billed(cli.base_url)
    proc = cli.popen("deploy", *args, "--budget-tokens", str(cap), "--out", str(tmp_path / "out"), FLEET_STORE=store)
    run_id = None
    for crash in range(3):
        await _freeze_answer_kill(cli, proc)
        if run_id is None:
            _, runs = cli.json("status", FLEET_STORE=store)
            run_id = runs["runs"][0]["run_id"]
        if crash < 2:
            proc = cli.popen("resume", run_id, "--json", FLEET_STORE=store)
    assert run_id is not None
    code, final = cli.json("resume", run_id, FLEET_STORE=store)
    billed = _sim_billed(cli.base_url) - before
    assert code in (0, 3), final
    assert final["llm_calls_resent"] > 0
    assert final["tokens"]["total"] + final["tokens_resent"]["total"] >= billed > final["tokens"]["total"]
    async with open_store(store) as log:
        spent: dict[str, int] = {}
        one_call = 0  # a call's reservation: its prompt estimate + its max_tokens
        for rec in await log.list_sessions(run_id):
            n = 0
            for e in await log.get_events(rec.session_id):
                if e.type == EventType.MODEL_RESENT:
                    n += int(e.data["tokens"])
                    one_call = max(one_call, int(e.data["tokens"]))
                elif e.type == EventType.MODEL_RESPONSE:
                    usage = e.data["response"]["usage"]
                    n += int(usage["input_tokens"]) + int(usage["output_tokens"])
            spent[rec.session_id] = n
    assert one_call > 0
    over = {sid: n for sid, n in spent.items() if n > cap + one_call}
    assert not over, (cap, one_call, over)
    print(
        f"\nbilled {billed:,} · tokens {final['tokens']['total']:,} + resent {final['tokens_resent']['total']:,}"
        f" ({final['llm_calls_resent']} calls) · max session {max(spent.values()):,} of cap {cap:,} + {one_call:,}"
    )
