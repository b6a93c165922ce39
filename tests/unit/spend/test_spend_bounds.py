"""The budget guarantees at fleet scale, on a virtual clock (the provider is the paid-model fake).

The documented rule (agent_fleet.spend.budget): a call is admitted while ``spent + reserved < cap``
and reserves ``min(worst case, room)``; one short reservation per account at a time, so a cap is
crossed by less than one call (plus any prompt under-estimate); strict mode lowers ``max_tokens`` instead.
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
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.model_breaker import BreakerConfig
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
async def test_parallel_callers_of_one_session_stop_past_the_cap_by_less_than_one_call(callers: int) -> None:
    clock = VirtualClock()
    rng = random.Random(callers)

    def answer(request: ChatRequest) -> ChatResponse:
        # Real usage varies below the worst case (3,000 prompt + 1,000 max output).
        return ChatResponse(content="ok", usage=Usage(rng.randint(500, 3000), rng.randint(1, 1000)), model="m")

    provider = FakeProvider(clock, model="m", latency=1.5)
    provider.script = [answer] * 100_000
    cap = Decimal("1.00")
    gw = Gateway(
        provider, clock=clock, prices=PRICES, session_tokens=None, session_usd=cap, estimate_prompt=lambda r: 3000
    )
    worst = PRICES.worst_case("m", 3000, 1000)
    peak_short = 0

    async def watch() -> None:
        nonlocal peak_short
        acct = gw.book.account("session", "one")
        while True:
            peak_short = max(peak_short, acct.short_reservations)
            await clock.sleep(0.25)

    async with asyncio.TaskGroup() as tg:
        watcher = tg.create_task(watch())
        await run_sessions(gw, clock, ["one"], callers=callers)
        watcher.cancel()
    spent = gw.book.account("session", "one").spent_usd
    assert spent >= cap  # nobody was refused while budget was left
    assert spent - cap < worst  # the call that crossed the cap finished: less than one call over
    assert peak_short == 1  # one short reservation at a time
    s = gw.statistics()
    assert (s.open_reservations, gw.book.waiting()) == (0, 0)


async def test_a_client_asking_for_more_than_the_whole_budget_runs_until_the_budget_is_spent():
    """Claude Code's case: max_tokens 128,000 and a 49 KB body on every turn, a call costing 4,446 tokens."""
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(4_100, 346), latency=3.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=128_000, estimate_prompt=lambda r: 16_515)
    big = ChatRequest(model="m", messages=[{"role": "user", "content": "go"}], max_tokens=128_000)
    calls = 0
    with pytest.raises(BudgetExhausted) as info:
        while True:
            task = asyncio.ensure_future(gw.complete("cc", big))
            await clock.run_for(3.0)
            await task
            calls += 1
    assert calls == 29  # the worst case (144,515) exceeds the cap, yet every call with budget left runs
    assert gw.book.account("session", "cc").spent_tokens == 29 * 4_446 == 128_934  # 934 over: the last call
    assert "reached" in str(info.value)
    assert provider.calls == 29


@pytest.mark.parametrize("callers", [1, 3, 8, 50])
async def test_the_overshoot_is_one_short_call_whatever_the_number_of_callers(callers: int) -> None:
    clock = VirtualClock()
    # Every call costs its worst case (3,000 + 1,000): two fit the 10,000 cap, the third gets the 2,000 left.
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000), latency=1.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=10_000, estimate_prompt=lambda r: 3000)
    done = await run_sessions(gw, clock, ["one"], callers=callers)
    assert sum(done.values()) == provider.calls == 3
    assert gw.book.account("session", "one").spent_tokens == 12_000  # cap + (4,000 − 2,000 reserved)
    assert (gw.book.waiting(), gw.statistics().open_reservations) == (0, 0)


@pytest.mark.parametrize("scope", ["session", "run", "queue", "model"])
async def test_every_scope_admits_until_its_cap_is_spent(scope: str) -> None:
    clock = VirtualClock()
    # Calls use a quarter of what they reserve: the old rule (worst case must fit) stopped at 6 or 7 calls.
    provider = FakeProvider(clock, model="m", usage=Usage(800, 200), latency=1.0)
    gw = Gateway(
        provider,
        clock=clock,
        prices=PRICES,
        session_tokens=10_000 if scope == "session" else None,
        run_tokens=10_000 if scope == "run" else None,
        estimate_prompt=lambda r: 3000,
    )
    sessions = ["one"] if scope == "session" else ["a", "b", "c", "d"]
    for sid in sessions:
        gw.register_session(sid, queue="team")
    if scope == "queue":
        gw.set_queue_budget("team", tokens=10_000)
    if scope == "model":
        gw.set_model_budget("m", tokens=10_000)
    done = await run_sessions(gw, clock, sessions, callers=4 if scope == "session" else 1)
    assert sum(done.values()) == 10  # every short reservation (1,000-3,000) covers a 1,000-token call
    acct = {"session": ("session", "one"), "run": ("run", "fleet"), "queue": ("queue", "team"), "model": ("model", "m")}
    assert gw.book.account(*acct[scope]).spent_tokens == 10_000
    assert (gw.book.waiting(), gw.statistics().open_reservations) == (0, 0)


def _uses_all(request: ChatRequest) -> ChatResponse:
    return ChatResponse(content="ok", usage=Usage(500, request.max_tokens), model="m")


async def test_strict_mode_lowers_max_tokens_to_what_is_left_and_never_overshoots():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=1.0)
    provider.script = [_uses_all] * 100
    seen: list[int] = []
    real = provider.complete

    async def record(request: ChatRequest) -> ChatResponse:
        seen.append(request.max_tokens)
        return await real(request)

    provider.complete = record  # type: ignore[method-assign]
    gw = Gateway(
        provider,
        clock=clock,
        prices=PRICES,
        session_tokens=10_000,
        estimate_prompt=lambda r: 500,
        budget_mode="strict",
        strict_floor=100,
    )
    done = await run_sessions(gw, clock, ["one"])
    assert seen == [1000] * 6 + [500]  # 9,000 spent, 1,000 left: a 500-token prompt and 500 to answer
    assert done["one"] == 7
    assert gw.book.account("session", "one").spent_tokens == 10_000  # exactly the cap


async def test_strict_mode_with_parallel_callers_spends_exactly_the_cap():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=1.0)
    provider.script = [_uses_all] * 100
    gw = Gateway(
        provider,
        clock=clock,
        prices=PRICES,
        session_tokens=10_000,
        estimate_prompt=lambda r: 500,
        budget_mode="strict",
        strict_floor=100,
    )
    await run_sessions(gw, clock, ["one"], callers=4)
    assert gw.book.account("session", "one").spent_tokens == 10_000
    with pytest.raises(BudgetExhausted):
        await gw.complete("one", REQ)


async def test_strict_mode_pauses_when_less_than_the_floor_is_left():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(500, 1000))
    gw = Gateway(
        provider,
        clock=clock,
        prices=PRICES,
        session_tokens=3_400,
        estimate_prompt=lambda r: 500,
        budget_mode="strict",
        strict_floor=500,
    )
    await gw.complete("one", REQ)
    await gw.complete("one", REQ)
    with pytest.raises(BudgetExhausted) as info:
        await gw.complete("one", REQ)  # 400 left: not even the prompt fits, let alone a 500-token answer
    assert "strict" in str(info.value)
    assert provider.calls == 2 and gw.book.account("session", "one").spent_tokens == 3_000


async def test_a_call_waiting_for_room_can_be_cancelled_and_leaves_nothing_behind():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000), latency=5.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=8_000, estimate_prompt=lambda r: 3000)
    first = [asyncio.ensure_future(gw.complete("one", REQ)) for _ in range(2)]
    await clock.run_for(0.1)
    waiting = asyncio.ensure_future(gw.complete("one", REQ))
    await clock.run_for(0.1)
    assert gw.book.waiting() == 1 and provider.calls == 2
    waiting.cancel()
    await clock.run_for(0.1)
    assert gw.book.waiting() == 0
    await clock.run_for(5.0)
    await asyncio.gather(*first)
    assert provider.calls == 2 and gw.book.account("session", "one").spent_tokens == 8_000
    assert gw.statistics().open_reservations == 0


async def test_a_raise_wakes_a_waiting_call():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000), latency=5.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=4_000, estimate_prompt=lambda r: 3000)
    first = asyncio.ensure_future(gw.complete("one", REQ))
    await clock.run_for(0.1)
    second = asyncio.ensure_future(gw.complete("one", REQ))
    await clock.run_for(1.0)
    assert gw.book.waiting() == 1  # the cap is fully reserved by the first call
    gw.set_session_budget("one", tokens=8_000)
    await clock.run_for(0.1)
    assert provider.calls == 2 and gw.book.waiting() == 0
    await clock.run_for(10.0)
    await asyncio.gather(first, second)
    assert gw.book.account("session", "one").spent_tokens == 8_000


async def test_under_estimated_prompts_overshoot_by_at_most_the_documented_bound():
    clock = VirtualClock()
    # The estimate says 3,000 prompt tokens; the provider counts 3,300: 300 unreserved tokens per call.
    provider = FakeProvider(clock, model="m", usage=Usage(3300, 1000), latency=1.0)
    gw = Gateway(provider, clock=clock, prices=PRICES, session_tokens=36_000, estimate_prompt=lambda r: 3000)
    await run_sessions(gw, clock, ["one"], callers=10)
    spent = gw.book.account("session", "one").spent_tokens
    # 9 reservations of 4,000 fill the 36,000 cap at once (the tenth waits, then is refused); each costs 4,300
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
    assert s.in_flight == 0 and gw.book.waiting() == 0
    assert (s.reserved_tokens, s.reserved_usd, s.open_reservations) == (0, 0, 0)
    assert s.concurrency.borrowed_tokens == 0 and s.concurrency.tasks_waiting == 0
    assert gw.limiter.available_tokens == gw.limiter.total
    run = gw.book.run
    assert run.spent_tokens == sum(a.spent_tokens for (sc, _), a in gw.book.accounts.items() if sc == "session")
