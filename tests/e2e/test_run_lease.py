"""One owner per run: two ``agent-fleet resume RUN_ID`` started together on a crashed run.

Exactly one executes the run; the other exits 5 with one line naming the owner; every session
completes once and every result is recorded once, and the provider answers the crashed run and its
resumes exactly the calls of one uninterrupted run plus the calls whose answers the crash lost (those
in flight, and those answered but not yet written), its bill within that many calls of the
uninterrupted run's — on SQLite and on PostgreSQL. ``FLEET_LEASE_TRIALS`` repeats the drill (default 1 per store).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store

from .conftest import Cli, write_lines
from .test_kill_resume import _billed, _freeze_answer_kill, _sim_answered, _sim_stats

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PG = "postgresql://postgres@127.0.0.1:5432/test"
TRIALS = int(os.environ.get("FLEET_LEASE_TRIALS", "1"))
AGENTS = 200
ITEMS = 2000


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lease.db'}"
        return
    schema = f"fleet_lease_{secrets.token_hex(4)}"
    try:
        yield f"{PG}?schema={schema}"
    finally:
        conn = await asyncpg.connect(PG)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


async def _until_answers_recorded(store: str, run_id: str, proc: subprocess.Popen[str]) -> None:
    """Wait until the run's log holds answers, so the crash comes mid-way (a loaded machine may still
    be starting its first calls a second after the run began)."""
    async with open_store(store) as log:
        for _ in range(1200):
            assert proc.poll() is None, "the run ended before a crash: make it longer"
            if await log.events_of_run(run_id, [EventType.MODEL_RESPONSE]):
                return
            await asyncio.sleep(0.05)
    raise AssertionError("no answer was recorded in 60 s")


async def _crashed_run(cli: Cli, store: str, args: tuple[str, ...]) -> tuple[str, int]:
    """A run frozen mid-way, its calls in flight answered by the provider, then killed -9: its id and
    the answers the provider gave that the log does not hold. Those are the calls a resume may send
    again: the ones in flight at the crash, and the ones answered before it whose answers were not yet
    written (and so the only calls that may be billed twice)."""
    answered_before = _sim_answered(_sim_stats(cli.base_url))
    proc = cli.popen("deploy", *args, "--json", FLEET_STORE=store)
    assert proc.stderr is not None
    started = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
    assert started.startswith("agent-fleet: run "), started
    run_id = started.split()[2]
    await _until_answers_recorded(store, run_id, proc)
    answered = _sim_answered(await _freeze_answer_kill(cli, proc)) - answered_before
    proc.communicate()
    async with open_store(store) as log:
        recorded = await log.events_of_run(run_id, [EventType.MODEL_RESPONSE, EventType.CONTEXT_COMPACTED])
    assert 0 < len(recorded) <= answered, (len(recorded), answered)
    return run_id, answered - len(recorded)


async def _uninterrupted(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> tuple[int, int, int]:
    """One uninterrupted run: the provider's bill for it, the calls it answered, and the costliest call."""
    store = f"sqlite:///{tmp_path / 'clean.db'}"
    before = _sim_stats(cli.base_url)
    code, summary = cli.json("deploy", *args, FLEET_STORE=store)
    assert code == 0, summary
    after = _sim_stats(cli.base_url)
    bill = _billed(after) - _billed(before)
    calls = _sim_answered(after) - _sim_answered(before)
    async with open_store(store) as log:
        answers = await log.events_of_run(summary["run_id"], [EventType.MODEL_RESPONSE])
    usage = [e.data["response"]["usage"] for e in answers]
    return bill, calls, max(u["input_tokens"] + u["output_tokens"] for u in usage)


async def _check_once(store: str, run_id: str) -> None:
    async with open_store(store) as log:
        sessions = await log.list_sessions(run_id)
        assert len(sessions) == AGENTS
        events = await log.events_of_run(run_id, [EventType.SESSION_COMPLETED, EventType.RESULT_ITEM])
    completed = Counter(e.session_id for e in events if e.type == EventType.SESSION_COMPLETED)
    assert set(completed.values()) == {1} and len(completed) == AGENTS  # every session completed once
    results = Counter((e.session_id, e.data["body"]) for e in events if e.type == EventType.RESULT_ITEM)
    assert max(results.values()) == 1  # no result recorded twice
    per_session = Counter(sid for sid, _ in results)
    assert set(per_session.values()) == {ITEMS // AGENTS}  # every item of every partition once


async def test_two_resumes_of_a_crashed_run_one_executes_the_other_exits_5(
    slow_cli: Cli, tmp_path: Path, store: str
) -> None:
    src = write_lines(tmp_path / "urls.txt", ITEMS)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", str(AGENTS), "--embedder", "lexical")
    clean_bill, clean_calls, costliest_call = await _uninterrupted(slow_cli, tmp_path, args)
    for _trial in range(TRIALS):
        before = _sim_stats(slow_cli.base_url)
        run_id, unheard = await _crashed_run(slow_cli, store, args)
        first, second = (slow_cli.popen("resume", run_id, "--json", FLEET_STORE=store) for _ in range(2))
        outs = await asyncio.gather(*(asyncio.to_thread(p.communicate, timeout=300) for p in (first, second)))
        codes = sorted((p.returncode, out, err) for p, (out, err) in zip((first, second), outs, strict=True))
        (ok, _, _), (refused, refused_out, refused_err) = codes
        assert (ok, refused) == (0, 5), codes
        assert refused_out == "" and "Traceback" not in refused_err
        line = refused_err.strip()
        assert "\n" not in line, refused_err
        assert line.startswith(f"agent-fleet: error: run {run_id} is owned by pid ")
        assert f" on {socket.gethostname()} " in line and line.endswith("use --wait to wait for it")
        await _check_once(store, run_id)
        after = _sim_stats(slow_cli.base_url)
        # only the calls whose answers the crash lost are sent again, once, by the one resume that runs
        calls = _sim_answered(after) - _sim_answered(before)
        billed = _billed(after) - _billed(before)
        print(
            f"\ncalls {calls} = {clean_calls} clean + {unheard} sent again · billed {billed:,} ({clean_bill:,} clean)"
        )
        assert calls == clean_calls + unheard, (calls, clean_calls, unheard)
        assert billed <= clean_bill + unheard * costliest_call, (billed, clean_bill, unheard, costliest_call)
        # the run has ended and the lease was given back: a later resume is not refused
        again = slow_cli.run("resume", run_id, "--json", FLEET_STORE=store)
        assert again.returncode == 0, again.stderr
