"""``agent-fleet budget raise``: the event in the log, and what a live gateway does with it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted
from agent_fleet.session.store import open_store
from agent_fleet.spend.gateway import Gateway, apply_budget_event
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.testing.fakes import FakeProvider
from agent_fleet.testing.processes import reaped_async

RUN = "run-000000000001abcdef"
SESSION = f"{RUN}.s00000"
REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "go"}], max_tokens=1000)


@pytest.fixture
async def store(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/fleet.db"
    async with open_store(url) as log:
        await log.emit_event(RUN, EventType.RUN_CREATED, {"task": "t"})
        await log.emit_event(SESSION, EventType.SESSION_CREATED, {"run_id": RUN, "partition_id": "p0", "index": 0})
        await log.emit_event(SESSION, EventType.SESSION_PAUSED, {"reason": "budget"})
    return url


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str


async def invoke(*args: str) -> Ran:
    """The command as a real process."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent_fleet.cli", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    async with reaped_async(proc):  # killed if the wait times out
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def events_of(url: str, sid: str) -> list[dict]:
    async with open_store(url) as log:
        return [e.to_dict() for e in await log.get_events(sid)]


async def test_raise_appends_a_budget_raised_event(store: str) -> None:
    result = await invoke("budget", "raise", SESSION, "--tokens", "256000", "--store", store, "--json")
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["type"] == "budget_raised" and printed["data"] == {"tokens": 256000}
    last = (await events_of(store, SESSION))[-1]
    assert (last["type"], last["data"]) == ("budget_raised", {"tokens": 256000})
    result = await invoke("budget", "raise", RUN, "--usd", "12.50", "--store", store)
    assert result.exit_code == 0, result.stderr
    assert "run" in result.stdout and "usd 12.50" in result.stdout
    last = (await events_of(store, RUN))[-1]
    assert last["data"] == {"usd": "12.50"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([SESSION], "give --tokens N or --usd X"),
        ([SESSION, "--tokens", "0"], "--tokens must be at least 1"),
        ([SESSION, "--usd", "lots"], "--usd must be a number of dollars"),
        ([SESSION, "--usd", "-3"], "--usd must be more than 0"),
        (["run-nope", "--tokens", "5"], "no run or session 'run-nope'"),
    ],
)
def test_bad_raise_is_one_line_exit_2(store: str, args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent_fleet.cli", "budget", "raise", *args, "--store", store],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


async def test_a_paused_session_resumes_when_the_event_is_applied(store: str) -> None:
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000))
    prices = PriceTable(overrides={"m": Rates(input=Decimal(1), output=Decimal(4))})
    gw = Gateway(provider, clock=clock, run_id=RUN, session_tokens=8_000, prices=prices, estimate_prompt=lambda r: 3000)
    await gw.complete(SESSION, REQ)
    await gw.complete(SESSION, REQ)
    with pytest.raises(BudgetExhausted):
        await gw.complete(SESSION, REQ)
    assert (await invoke("budget", "raise", SESSION, "--tokens", "16000", "--store", store)).exit_code == 0
    for event in await events_of(store, SESSION):
        if event["type"] == EventType.BUDGET_RAISED:
            apply_budget_event(gw, event["session_id"], event["data"])
    await gw.complete(SESSION, REQ)
    assert gw.session_budget(SESSION)["spent_tokens"] == 12_000
    # and lowering stops the next call at once
    apply_budget_event(gw, SESSION, {"tokens": 12_000})
    with pytest.raises(BudgetExhausted):
        await gw.complete(SESSION, REQ)
