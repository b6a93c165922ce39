"""The in-process gateway: budgets, retries, accounting on every exit path (virtual clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import (
    BudgetExhausted,
    ClientRequestError,
    Overloaded,
    QuotaExhausted,
    RateLimited,
)
from agent_fleet.spend.gateway import Gateway, apply_budget_event
from agent_fleet.spend.limiter import AdaptiveConfig
from agent_fleet.spend.model_breaker import BreakerConfig
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.spend.providers import ProviderTimeout, RateSignals
from agent_fleet.spend.retry import RetryPolicy
from agent_fleet.testing.fakes import FakeProvider

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "hello"}], max_tokens=1000)
PRICES = PriceTable(overrides={"m": Rates(input=Decimal(1), output=Decimal(4), cached_input=Decimal("0.1"))})


def make(clock: VirtualClock, **kw) -> tuple[Gateway, FakeProvider]:
    provider = kw.pop("provider", None) or FakeProvider(clock, model="m", usage=Usage(3000, 1000))
    kw.setdefault("estimate_prompt", lambda request: 3000)
    kw.setdefault("prices", PRICES)
    kw.setdefault("rand", lambda: 0.0)
    return Gateway(provider, clock=clock, **kw), provider


def assert_quiet(gw: Gateway) -> None:
    s = gw.statistics()
    assert s.in_flight == 0
    assert (s.reserved_tokens, s.reserved_usd, s.open_reservations) == (0, 0, 0)
    assert s.concurrency.borrowed_tokens == 0


async def test_session_stops_at_exactly_32_calls_of_4k():
    clock = VirtualClock()
    gw, provider = make(clock)
    for _ in range(32):
        await gw.complete("s1", REQ)
    with pytest.raises(BudgetExhausted) as info:
        await gw.complete("s1", REQ)
    assert info.value.scope == "session"
    assert provider.calls == 32  # the refused call was never sent
    assert gw.session_usage("s1").total_tokens == 128_000
    assert_quiet(gw)


async def test_cost_is_priced_and_stamped_on_the_response():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(1_000_000, 1_000_000, cached_input_tokens=400_000))
    gw, _ = make(clock, provider=provider, session_tokens=None)
    r = await gw.complete("s1", REQ)
    # 600k plain at $1, 400k cached at $0.1, 1M out at $4: cached never priced twice
    assert r.cost_usd == Decimal("4.64")
    assert gw.meter.run.cost_usd == Decimal("4.64")
    assert gw.session_budget("s1")["spent_usd"] == "4.64"


async def test_parallel_callers_of_one_session_never_overshoot():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000), latency=1.0)
    # worst case per call = 3000 × $1 + 1000 × $4 per MTok = $0.007; cap fits 10 calls
    gw, _ = make(clock, provider=provider, session_tokens=None, session_usd="0.07")
    outcomes: list[str] = []

    async def caller() -> None:
        while True:
            try:
                await gw.complete("s1", REQ)
            except BudgetExhausted:
                outcomes.append("paused")
                return

    async with asyncio.TaskGroup() as tg:
        for _ in range(8):
            tg.create_task(caller())
        tg.create_task(clock.run_for(100))
    budget = gw.session_budget("s1")
    assert Decimal(budget["spent_usd"]) == Decimal("0.07")
    assert provider.calls == 10
    assert outcomes == ["paused"] * 8
    assert_quiet(gw)


async def test_fleet_spent_is_exactly_the_sum_of_sessions():
    clock = VirtualClock()
    gw, _ = make(clock, run_usd="1000")
    async with asyncio.TaskGroup() as tg:
        for i in range(40):
            tg.create_task(gw.complete(f"s{i % 7}", REQ))
    run = gw.book.run
    sessions = [a for (scope, _), a in gw.book.accounts.items() if scope == "session"]
    assert run.spent_tokens == sum(a.spent_tokens for a in sessions) == 40 * 4000
    assert run.spent_usd == sum((a.spent_usd for a in sessions), Decimal(0))
    assert gw.meter.run.cost_usd == run.spent_usd


async def test_fleet_cap_pauses_every_session():
    clock = VirtualClock()
    gw, provider = make(clock, run_tokens=10_000)
    await gw.complete("a", REQ)
    await gw.complete("b", REQ)
    await gw.complete("c", REQ)  # 2,000 left: admitted, and it finishes
    with pytest.raises(BudgetExhausted) as info:
        await gw.complete("d", REQ)
    assert info.value.scope == "run"
    assert provider.calls == 3
    assert gw.book.run.spent_tokens == 12_000


async def test_rate_limited_call_waits_retry_after_then_succeeds():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000))
    provider.script = [RateLimited("slow down", status=429, retry_after=5.0)]
    gw, _ = make(clock, provider=provider)
    task = asyncio.create_task(gw.complete("s1", REQ))
    await clock.run_for(4.9)
    assert not task.done() and provider.calls == 1
    await clock.run_for(0.2)
    r = await task
    assert r.retried == ("rate_limited",)
    assert provider.calls == 2
    assert gw.meter.run.errors["rate_limited"] == 1
    assert gw.meter.run.calls == 1
    assert_quiet(gw)


def window_full(provider: FakeProvider, retry_after: float) -> Callable[[ChatRequest], ChatResponse]:
    """A 429 whose headers say the requests window is used up (as OpenAI and Anthropic send them)."""

    def step(request: ChatRequest) -> ChatResponse:
        assert provider.on_signals is not None
        provider.on_signals(request.model, RateSignals(limit_requests=100, remaining_requests=0))
        raise RateLimited("window used up", status=429, retry_after=retry_after)

    return step


async def test_a_shorter_retry_after_never_shortens_the_cooldown():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=1.0)
    provider.script = [window_full(provider, 10.0), window_full(provider, 1.0)]
    gw, _ = make(clock, provider=provider)
    tasks = [asyncio.create_task(gw.complete(s, REQ)) for s in ("a", "b")]
    await clock.run_for(0.5)
    assert provider.calls == 2  # both in flight; both answered 429 at t=1
    await clock.run_for(10.4)
    assert provider.calls == 2  # b's 1 s retry-after does not cut a's 10 s cooldown (until t=11)
    await clock.run_for(0.2)
    assert provider.calls == 4
    await clock.run_for(1.0)
    await asyncio.gather(*tasks)


async def test_a_429_without_an_exhausted_window_holds_back_only_its_own_retry():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=1.0)
    provider.script = [RateLimited("busy", status=429, retry_after=10.0)]
    gw, _ = make(clock, provider=provider)
    first = asyncio.create_task(gw.complete("a", REQ))
    await clock.run_for(1.5)
    second = asyncio.create_task(gw.complete("b", REQ))
    await clock.run_for(1.0)
    assert second.done() and provider.calls == 2  # b was not frozen by a's retry-after
    assert not first.done()
    await clock.run_for(10)
    assert (await first).retried == ("rate_limited",)


async def test_overload_retries_with_backoff_and_gives_up():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m")
    provider.script = [Overloaded("busy", status=529)] * 4
    gw, _ = make(clock, provider=provider, retry=RetryPolicy(max_attempts=4, base_delay_s=1.0, jitter=0.0))
    task = asyncio.create_task(gw.complete("s1", REQ))
    await clock.run_for(100)
    with pytest.raises(Overloaded):
        await task
    assert provider.calls == 4
    assert clock.now() == 100
    assert gw.meter.run.errors["server"] == 4
    assert gw.session_budget("s1")["spent_tokens"] == 0  # answered errors are never charged
    assert_quiet(gw)


async def test_quota_exhausted_is_never_retried_and_marks_the_model():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m")
    provider.script = [QuotaExhausted("insufficient_quota", status=429)]
    gw, _ = make(clock, provider=provider)
    with pytest.raises(QuotaExhausted):
        await gw.complete("s1", REQ)
    with pytest.raises(QuotaExhausted):
        await gw.complete("s1", REQ)
    assert provider.calls == 1
    assert gw.exhausted_models() == {"m"}
    assert_quiet(gw)


async def test_client_errors_are_not_retried():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m")
    provider.script = [ClientRequestError("bad request", status=400)]
    gw, _ = make(clock, provider=provider)
    with pytest.raises(ClientRequestError):
        await gw.complete("s1", REQ)
    assert provider.calls == 1
    assert_quiet(gw)


async def test_cancelled_in_flight_call_is_charged_its_reservation():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=10.0)
    gw, _ = make(clock, provider=provider)
    task = asyncio.create_task(gw.complete("s1", REQ))
    await clock.run_for(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gw.session_budget("s1")["spent_tokens"] == 4000
    assert_quiet(gw)


async def test_cancelled_while_waiting_for_a_permit_costs_nothing():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=10.0)
    gw, _ = make(clock, provider=provider, concurrency=1)
    first = asyncio.create_task(gw.complete("a", REQ))
    second = asyncio.create_task(gw.complete("b", REQ))
    await clock.run_for(1)
    assert gw.statistics().concurrency.tasks_waiting == 1
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert gw.session_budget("b")["spent_tokens"] == 0
    await clock.run_for(10)
    await first
    assert provider.calls == 1 + 0
    assert_quiet(gw)


async def test_timeout_after_sending_charges_the_reservation():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m")
    err = ProviderTimeout("host did not answer in time")
    err.sent = True  # type: ignore[attr-defined]
    provider.script = [err]
    gw, _ = make(clock, provider=provider)
    with pytest.raises(ProviderTimeout):
        await gw.complete("s1", REQ)
    assert provider.calls == 1  # not retried: it may have been processed
    assert gw.session_budget("s1")["spent_tokens"] == 4000
    assert gw.meter.run.errors["timeout"] == 1
    assert_quiet(gw)


async def test_restore_spent_seeds_the_session_once():
    clock = VirtualClock()
    gw, _ = make(clock)
    gw.restore_spent("s1", Usage(100_000, 24_000), Decimal("0.5"))
    gw.restore_spent("s1", Usage(100_000, 24_000), Decimal("0.5"))  # replayed twice: counted once
    assert gw.session_budget("s1")["spent_tokens"] == 124_000
    assert gw.book.run.spent_usd == Decimal("0.5")
    await gw.complete("s1", REQ)
    with pytest.raises(BudgetExhausted):
        await gw.complete("s1", REQ)


async def test_raise_and_lower_a_session_cap():
    clock = VirtualClock()
    gw, _ = make(clock, session_tokens=8000)
    await gw.complete("s1", REQ)
    await gw.complete("s1", REQ)
    with pytest.raises(BudgetExhausted):
        await gw.complete("s1", REQ)
    gw.set_session_budget("s1", tokens=12_000)
    await gw.complete("s1", REQ)
    gw.set_session_budget("s1", tokens=1)
    with pytest.raises(BudgetExhausted):
        await gw.complete("s1", REQ)


async def test_apply_budget_event_for_a_session_and_for_the_run():
    clock = VirtualClock()
    gw, _ = make(clock, session_tokens=4000, run_id="run-1", run_usd="0.02")
    await gw.complete("run-1.s00000", REQ)
    with pytest.raises(BudgetExhausted):
        await gw.complete("run-1.s00000", REQ)
    apply_budget_event(gw, "run-1.s00000", {"tokens": 8000})
    await gw.complete("run-1.s00000", REQ)
    apply_budget_event(gw, "run-1", {"tokens": 100_000})
    assert gw.session_budget("run-1.s00000")["cap_tokens"] == 100_000
    assert gw.session_budget("run-1.s00009")["cap_tokens"] == 100_000  # sessions to come
    await gw.complete("run-1.s00000", REQ)  # $0.014 spent, under the $0.02 fleet cap: admitted
    with pytest.raises(BudgetExhausted) as info:
        await gw.complete("run-1.s00000", REQ)  # $0.021 spent: the fleet cap is reached
    assert info.value.scope == "run"
    apply_budget_event(gw, "run-1", {"usd": "1"})
    assert gw.book.run.cap_usd == Decimal("1")
    await gw.complete("run-1.s00000", REQ)


async def test_errors_shrink_the_adaptive_limit():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=0.5)
    provider.script = [Overloaded("busy", status=503)] * 30
    gw, _ = make(
        clock,
        provider=provider,
        concurrency=50,
        adaptive=AdaptiveConfig(baseline=50),
        retry=RetryPolicy(max_attempts=1),
        breaker=BreakerConfig(min_calls=1000),
        session_tokens=None,
    )

    async def one(i: int) -> None:
        try:
            await gw.complete(f"s{i}", REQ)
        except Overloaded:
            pass

    async with asyncio.TaskGroup() as tg:
        for i in range(100):
            tg.create_task(one(i))
        tg.create_task(clock.run_for(11))
    assert gw.statistics().limits == {"fake": 40}  # the window [0, 10) had 30 % errors
    assert gw.limiter.total == 40
    assert [(v.before, v.after, v.reason) for _, v in gw.verdicts] == [(50, 40, "error_rate")]
    assert_quiet(gw)


async def test_concurrency_cap_holds_and_is_adjustable():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=1.0)
    gw, _ = make(clock, provider=provider, concurrency=5, adaptive=False, session_tokens=None)
    async with asyncio.TaskGroup() as tg:
        for i in range(20):
            tg.create_task(gw.complete(f"s{i}", REQ))
        tg.create_task(clock.run_for(10))
    assert provider.peak == 5
    gw.set_concurrency(7)
    provider.peak = 0
    async with asyncio.TaskGroup() as tg:
        for i in range(20):
            tg.create_task(gw.complete(f"s{i}", REQ))
        tg.create_task(clock.run_for(10))
    assert provider.peak == 7
    assert "limit=7" in repr(gw)


async def test_tokens_per_minute_bucket_spaces_calls():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(3000, 1000))
    # 240,000 tokens/min = 4,000/s; 10 s burst = 40,000 tokens = 10 calls at once, then one per second
    gw, _ = make(clock, provider=provider, tokens_per_minute=240_000, session_tokens=None)
    times: list[float] = []

    async def one(i: int) -> None:
        await gw.complete(f"s{i}", REQ)
        times.append(clock.now())

    async with asyncio.TaskGroup() as tg:
        for i in range(13):
            tg.create_task(one(i))
        tg.create_task(clock.run_for(10))
    assert sorted(times) == [0.0] * 10 + [1.0, 2.0, 3.0]


async def test_aclose_closes_each_provider_once():
    clock = VirtualClock()
    gw, provider = make(clock)
    await gw.aclose()
    await gw.aclose()
    assert provider.closed == 1


async def test_breaker_opens_on_a_failure_storm_and_probes_after_cooling():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", latency=0.1)
    provider.script = [Overloaded("busy", status=503)] * 20
    gw, _ = make(
        clock,
        provider=provider,
        retry=RetryPolicy(max_attempts=1),
        breaker=BreakerConfig(min_calls=10, failure_rate=0.5, open_s=15.0),
        session_tokens=None,
    )
    for i in range(10):
        with pytest.raises(Overloaded):
            await asyncio.gather(gw.complete(f"s{i}", REQ), clock.run_for(0.1))
    assert gw.statistics().breakers == {"fake/m": "open"}
    # while open nothing is sent; the call waits for the half-open probe
    task = asyncio.create_task(gw.complete("late", REQ))
    await clock.run_for(10)
    assert provider.calls == 10
    await clock.run_for(5.2)
    assert provider.calls == 11
    with pytest.raises(Overloaded):
        await task


async def test_real_usage_below_the_estimate_is_given_back_to_the_bucket():
    clock = VirtualClock()
    provider = FakeProvider(clock, model="m", usage=Usage(300, 100))  # a tenth of the 4,000 reserved
    gw, _ = make(clock, provider=provider, tokens_per_minute=240_000, session_tokens=None)
    for i in range(30):
        await gw.complete(f"s{i}", REQ)
    assert clock.now() == 0.0  # 30 × 400 real tokens fit the 40,000 burst: nobody waited


async def test_restore_spent_never_counts_a_call_charged_live_twice() -> None:
    """A session's second attempt in the same process replays a log that holds the first attempt's
    calls, which this gateway already charged: only spend from outside it is restored."""
    from decimal import Decimal

    from agent_fleet.clock import VirtualClock
    from agent_fleet.domain.model import ChatRequest
    from agent_fleet.domain.usage import Usage
    from agent_fleet.spend.gateway import Gateway
    from agent_fleet.testing.fakes import FakeProvider

    clock = VirtualClock()
    gw = Gateway(FakeProvider(clock), clock=clock, session_tokens=None, adaptive=False)
    gw.restore_spent("s", Usage(1000, 100), Decimal("0.01"))  # spent before this process
    before = gw.session_usage("s").total_tokens
    resp = await gw.complete("s", ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=50))
    live = resp.usage.total_tokens
    assert gw.session_usage("s").total_tokens == before + live
    # the log now holds both; replaying it again must not add the live call a second time
    log_usage = Usage(1000 + resp.usage.input_tokens, 100 + resp.usage.output_tokens)
    gw.restore_spent("s", log_usage, Decimal("0.01") + resp.cost_usd)
    assert gw.session_usage("s").total_tokens == 1100 + live
    assert gw.meter.run.total_tokens == 1100 + live


def test_an_unanswered_call_is_charged_its_reservation_capped_at_the_output_limit():
    clock = VirtualClock()
    prices = PriceTable(overrides=PRICES.overrides, output_limits={"m": 600})
    gw, provider = make(clock, prices=prices)
    usage, usd = gw.unanswered_charge(REQ)  # max_tokens 1000, but m answers at most 600
    assert usage == Usage(3000, 600)
    assert usd == Decimal(3000 * 1 + 600 * 4) / 1_000_000
    usage, usd = gw.unanswered_charge(ChatRequest(model="m", messages=REQ.messages, max_tokens=200))
    assert (usage, usd) == (Usage(3000, 200), Decimal(3000 * 1 + 200 * 4) / 1_000_000)
    assert provider.calls == 0 and gw.book.reserved_total() == (0, 0, 0)  # pricing it charges nothing by itself
