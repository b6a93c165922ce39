"""One owner per run: two ``agent-fleet resume RUN_ID`` started together on a crashed run.

Exactly one executes the run; the other exits 5 with one line naming the owner; every session
completes once and every result is recorded once, and the provider's bill for the crashed run and
its resumes stays within one uninterrupted run's bill plus the calls in flight at the crash — on
SQLite and on PostgreSQL. ``FLEET_LEASE_TRIALS`` repeats the drill (default 1 per store).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store

from .conftest import Cli, write_lines
from .test_kill_resume import _sim_billed, _sim_in_flight

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


async def _crashed_run(cli: Cli, store: str, args: tuple[str, ...]) -> tuple[str, int]:
    """A run killed -9 mid-way; its id and the calls the provider had in flight at the kill."""
    proc = cli.popen("deploy", *args, "--json", FLEET_STORE=store)
    assert proc.stderr is not None
    started = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
    assert started.startswith("agent-fleet: run "), started
    await asyncio.sleep(1.5)
    in_flight = _sim_in_flight(cli.base_url)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return started.split()[2], in_flight


async def _uninterrupted(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> tuple[int, int]:
    """One uninterrupted run: the provider's bill for it, and its costliest call."""
    store = f"sqlite:///{tmp_path / 'clean.db'}"
    before = _sim_billed(cli.base_url)
    code, summary = cli.json("deploy", *args, FLEET_STORE=store)
    assert code == 0, summary
    bill = _sim_billed(cli.base_url) - before
    async with open_store(store) as log:
        answers = await log.events_of_run(summary["run_id"], [EventType.MODEL_RESPONSE])
    usage = [e.data["response"]["usage"] for e in answers]
    return bill, max(u["input_tokens"] + u["output_tokens"] for u in usage)


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
    clean_bill, costliest_call = await _uninterrupted(slow_cli, tmp_path, args)
    for _trial in range(TRIALS):
        before = _sim_billed(slow_cli.base_url)
        run_id, in_flight = await _crashed_run(slow_cli, store, args)
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
        billed = _sim_billed(slow_cli.base_url) - before
        assert billed <= clean_bill + in_flight * costliest_call, (billed, clean_bill, in_flight, costliest_call)
        # the run has ended and the lease was given back: a later resume is not refused
        again = slow_cli.run("resume", run_id, "--json", FLEET_STORE=store)
        assert again.returncode == 0, again.stderr
