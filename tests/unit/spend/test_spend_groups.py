"""A run's queue and team accounts: every call of the run is charged there, caps bind within one call,
and tallies seeded from the store are neither lost nor counted twice when a session is resumed."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.testing.fakes import FakeProvider

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "go"}], max_tokens=1000)
PRICES = PriceTable(overrides={"m": Rates(input=Decimal(1), output=Decimal(4))})  # $/MTok
CALL_USD = Decimal("0.0012")  # Usage(800, 100): 800 × $1 + 100 × $4 per million


def _gateway(clock: VirtualClock) -> tuple[Gateway, FakeProvider]:
    provider = FakeProvider(clock, model="m", usage=Usage(800, 100), latency=1.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=None, estimate_prompt=lambda r: 800)
    return gw, provider


async def _call(gw: Gateway, clock: VirtualClock, sid: str) -> None:
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(gw.complete(sid, REQ))
        while not task.done():
            await clock.run_for(1.0)


async def test_every_call_of_a_run_is_charged_to_its_queue_and_team() -> None:
    clock = VirtualClock()
    gw, _ = _gateway(clock)
    gw.assign_run("run-a", queue="default/research", team="alpha")
    for sid in ("run-a.planner", "run-a.s00000", "run-a.s00001", "run-a.v0000"):  # planner, agents, verifier
        await _call(gw, clock, sid)
    await _call(gw, clock, "run-b.s00000")  # another run: neither alpha's nor research's
    team = gw.meter.group(("team", "alpha"))
    assert (team.calls, team.total_tokens, team.cost_usd) == (4, 3600, 4 * CALL_USD)
    assert gw.meter.group(("queue", "default/research")).total_tokens == 3600
    assert gw.book.account("team", "alpha").spent_usd == 4 * CALL_USD
    assert {m: t.calls for m, t in gw.meter.run_models["run-a"].items()} == {"m": 4}  # the run's own figures
    assert gw.meter.run.calls == 5


async def test_a_team_at_its_budget_stops_within_one_call() -> None:
    clock = VirtualClock()
    gw, provider = _gateway(clock)
    gw.set_team_budget("alpha", usd=Decimal("0.005"))  # four calls and a bit
    sessions = [f"run-{r}.s{i:05d}" for r in "ab" for i in range(3)]
    for run in ("run-a", "run-b"):
        gw.assign_run(run, team="alpha")

    async def keep_calling(sid: str) -> None:
        for _ in range(20):  # far more than the budget allows
            try:
                await gw.complete(sid, REQ)
            except BudgetExhausted as exc:
                assert exc.scope == "team"
                return

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(keep_calling(sid)) for sid in sessions]
        while not all(t.done() for t in tasks):
            await clock.run_for(1.0)
    spent = gw.book.account("team", "alpha").spent_usd
    assert provider.calls == 5  # the fifth call is the one that crosses the cap; none after it
    assert Decimal("0.005") <= spent < Decimal("0.005") + CALL_USD


async def test_seeded_tallies_take_only_what_a_resumed_session_adds() -> None:
    clock = VirtualClock()
    gw, _ = _gateway(clock)
    # what the store recorded: two runs of alpha, 5,000 tokens; one session unfinished at 900 tokens
    gw.groups.seed(AccountScope.TEAM, "alpha", Usage(4000, 1000), Decimal("0.008"), 6)
    gw.groups.baseline("run-a.s00001", Usage(800, 100), CALL_USD)
    gw.assign_run("run-a", team="alpha")
    # resumed: its log holds its 900 tokens and one send a crash left unanswered (charged at 1,800)
    gw.restore_spent("run-a.s00001", Usage(800 + 800, 100 + 1000), CALL_USD + Decimal("0.0048"))
    team = gw.meter.group(("team", "alpha"))
    assert (team.total_tokens, team.cost_usd, team.calls) == (5000 + 1800, Decimal("0.008") + Decimal("0.0048"), 6)
    gw.restore_spent("run-a.s00001", Usage(1600, 1100), CALL_USD + Decimal("0.0048"))  # again: nothing new
    assert gw.meter.group(("team", "alpha")).total_tokens == 6800
    assert gw.book.account("team", "alpha").spent_tokens == 6800
    await _call(gw, clock, "run-a.s00001")  # and live calls count once
    assert gw.meter.group(("team", "alpha")).total_tokens == 7700
