"""The budget guarantees at fleet scale, on a virtual clock (the provider is the paid-model fake).

The documented bound (agent_fleet.spend.budget): spent ≤ cap + Σ over calls in flight when the cap
was reached of max(0, real − reserved). With reservations that cover the real usage it is zero.
"""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted, FleetError, Overloaded, RateLimited
from agent_fleet.spend.breaker import BreakerConfig
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.spend.providers import ProviderTimeout
from agent_fleet.spend.retry import RetryPolicy
from agent_fleet.testing.fakes import FakeProvider

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "go"}], max_tokens=1000)
PRICES = PriceTable(overrides={"m": Rates(input=Decimal("2.5"), output=Decimal(10))})


async def run_sessions(gw: Gateway, clock: VirtualClock, sessions: list[str], callers: int = 1) -> dict[str, int]:
    """Each session calls until its budget stops it; returns the successful calls per session."""
    done: dict[str, int] = dict.fromkeys(sessions, 0)

    async def caller(sid: str) -> None:
        while True:
            try:
                await gw.complete(sid, REQ)
            except BudgetExhausted:
                return
            done[sid] += 1

    async def drive() -> None:
        while any(not t.done() for t in tasks):
            await clock.run_for(1.0)

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(caller(sid)) for sid in sessions for _ in range(callers)]
        tg.create_task(drive())
    return done


async def test_thousand_sessions_each_stop_at_exactly_32_calls():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000), latency=2.0)
    gw = Gateway(provider, clock=clock, concurrency=50, prices=PRICES, estimate_prompt=lambda r: 3000)
    sessions = [f"run.s{i:05d}" for i in range(1000)]
    done = await run_sessions(gw, clock, sessions)
    assert set(done.values()) == {32}
    assert provider.calls == 32_000  # refused calls never reach the provider
    assert provider.peak == 50
    assert gw.book.run.spent_tokens == 1000 * 128_000  # the bound is 0 here: no overshoot at all
    assert gw.book.run.spent_usd == sum(
        (a.spent_usd for (scope, _), a in gw.book.accounts.items() if scope == "session"), Decimal(0)
    )
    s = gw.statistics()
    assert (s.in_flight, s.open_reservations, s.concurrency.borrowed_tokens) == (0, 0, 0)


@pytest.mark.parametrize("callers", [8, 50])
async def test_parallel_callers_of_one_session_stay_within_the_dollar_bound(callers: int) -> None:
    clock = VirtualClock()
    rng = random.Random(callers)

    def answer(request: ChatRequest) -> ChatResponse:
        # Real usage varies below the reservation (3,000 prompt + 1,000 max output).
        return ChatResponse(content="ok", usage=Usage(rng.randint(500, 3000), rng.randint(1, 1000)), model="m")

    provider = FakeProvider(clock, model="m", latency=1.5)
    provider.script = [answer] * 100_000
    cap = Decimal("1.00")
    gw = Gateway(
        provider, clock=clock, prices=PRICES, session_tokens=None, session_usd=cap, estimate_prompt=lambda r: 3000
    )
    await run_sessions(gw, clock, ["one"], callers=callers)
    spent = gw.book.account("session", "one").spent_usd
    assert spent <= cap  # reservations cover real usage: the bound is zero
    # and it stopped close to the cap: less than one worst-case call of room was left unused
    assert cap - spent < Decimal("0.0175")
    assert gw.statistics().open_reservations == 0


async def test_under_estimated_prompts_overshoot_by_at_most_the_documented_bound():
    clock = VirtualClock()
    # The estimate says 3,000 prompt tokens; the provider counts 3,300: 300 unreserved tokens per call.
    provider = FakeProvider(clock, model="m", usage=Usage(3300, 1000), latency=1.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=36_000, estimate_prompt=lambda r: 3000)
    await run_sessions(gw, clock, ["one"], callers=10)
    spent = gw.book.account("session", "one").spent_tokens
    # 9 reservations of 4,000 fit the 36,000 cap at once; each call really costs 4,300
    assert provider.peak == 9
    assert spent == 9 * 4_300
    assert spent - 36_000 <= provider.peak * 300  # ≤ calls in flight × unreserved excess per call


async def test_no_leak_after_10000_calls_with_timeouts_cancellations_and_5xx():
    clock = VirtualClock()
    rng = random.Random(7)

    class Chaos(FakeProvider):
        async def complete(self, request: ChatRequest) -> ChatResponse:
            roll = rng.random()
            await self.clock.sleep(rng.uniform(0.05, 0.5))
            if roll < 0.07:
                err = ProviderTimeout("sim did not answer in time")
                err.sent = rng.random() < 0.5  # type: ignore[attr-defined]
                raise err
            if roll < 0.14:
                raise Overloaded("sim answered 503", status=503)
            if roll < 0.17:
                raise RateLimited("sim answered 429", status=429, retry_after=0.2)
            return await super().complete(request)

    provider = Chaos(clock, model="m", usage=Usage(300, 50))
    gw = Gateway(
        provider,
        clock=clock,
        prices=PRICES,
        concurrency=50,
        session_tokens=None,
        retry=RetryPolicy(max_attempts=2, base_delay_s=0.1),
        breaker=BreakerConfig(min_calls=10_000),
        rand=rng.random,
    )
    outcomes = {"ok": 0, "error": 0, "cancelled": 0}

    async def one(i: int) -> None:
        try:
            await gw.complete(f"s{i % 300}", REQ)
            outcomes["ok"] += 1
        except FleetError:
            outcomes["error"] += 1

    async def cancel_later(task: asyncio.Task[None]) -> None:
        await clock.sleep(rng.uniform(0.0, 40.0))
        task.cancel()

    async def drive(tasks: list[asyncio.Task[None]]) -> None:
        while any(not t.done() for t in tasks):
            await clock.run_for(0.5)

    tasks = [asyncio.create_task(one(i)) for i in range(10_000)]
    cancellers = [asyncio.create_task(cancel_later(t)) for t in rng.sample(tasks, 600)]
    await asyncio.gather(drive(tasks), *cancellers)
    for t in tasks:
        if t.cancelled():
            outcomes["cancelled"] += 1
    assert sum(outcomes.values()) == 10_000
    assert outcomes["error"] > 500 and outcomes["cancelled"] > 100 and outcomes["ok"] > 7_000
    s = gw.statistics()
    assert s.in_flight == 0
    assert (s.reserved_tokens, s.reserved_usd, s.open_reservations) == (0, 0, 0)
    assert s.concurrency.borrowed_tokens == 0 and s.concurrency.tasks_waiting == 0
    assert gw.limiter.available_tokens == gw.limiter.total
    run = gw.book.run
    assert run.spent_tokens == sum(a.spent_tokens for (sc, _), a in gw.book.accounts.items() if sc == "session")
