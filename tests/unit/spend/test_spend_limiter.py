"""The concurrency limiter, the adaptive rule and the token bucket with debt, on exact values."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.limiter import (
    AdaptiveConcurrency,
    AdaptiveConfig,
    ConcurrencyLimiter,
    LimiterFull,
    TokenBucket,
)
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.testing.fakes import FakeProvider

# --- ConcurrencyLimiter (the shared CapacityLimiter: tests/unit/test_capacity.py) ------------------


async def test_limiter_never_admits_more_than_its_total():
    lim = ConcurrencyLimiter(3)
    peak = 0
    active = 0

    async def worker(i: int) -> None:
        nonlocal peak, active
        permit = await lim.acquire(f"s{i % 4}")
        try:
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        finally:
            active -= 1
            lim.release(permit)

    async with asyncio.TaskGroup() as tg:
        for i in range(50):
            tg.create_task(worker(i))
    assert peak == 3
    assert lim.statistics().borrowed_tokens == 0
    assert lim.statistics().borrowers == {}
    full = ConcurrencyLimiter(1)
    full.acquire_nowait("a")
    with pytest.raises(LimiterFull, match="all 1 of the concurrency permits are taken"):
        full.acquire_nowait("b")


def gateway_with_rpm(clock: VirtualClock, latency: float) -> tuple[Gateway, FakeProvider]:
    provider = FakeProvider(clock, model="m", latency=latency, usage=Usage(10, 5))
    prices = PriceTable(overrides={"m": Rates(input=Decimal(1), output=Decimal(1))})
    gw = Gateway(provider, clock=clock, requests_per_minute=60, prices=prices, estimate_prompt=lambda r: 10)
    return gw, provider


async def test_a_call_reserves_its_permit_while_paced_and_uses_it_on_the_wire():
    """60 requests a minute with a ten-second burst: ten of twelve calls go out at once, the
    eleventh and twelfth hold reserved permits until the bucket lets them go at t=1 and t=2."""
    clock = VirtualClock()
    gw, provider = gateway_with_rpm(clock, latency=5.0)
    req = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=10)
    seen: list[tuple[float, int, int]] = []

    def note() -> None:
        s = gw.limiter.statistics()
        seen.append((clock.now(), s.reserved, s.in_use))

    async with asyncio.TaskGroup() as tg:
        for i in range(12):
            tg.create_task(gw.complete(f"s{i}", req))
        await clock.until_idle()
        note()
        for _ in range(7):
            await clock.run_for(1.0)
            note()
    assert seen == [
        (0.0, 2, 10),
        (1.0, 1, 11),
        (2.0, 0, 12),
        (3.0, 0, 12),
        (4.0, 0, 12),
        (5.0, 0, 2),  # the first ten answered at t=5
        (6.0, 0, 1),
        (7.0, 0, 0),
    ]
    assert provider.calls == 12 and gw.limiter.statistics().borrowed_tokens == 0


# --- AdaptiveConcurrency ----------------------------------------------------------------------------


def run_windows(
    rule: AdaptiveConcurrency, seconds: float, *, error_rate: float = 0.0, latency: float = 0.5
) -> list[int]:
    """Feed 100 calls per window at the given error rate; returns the limit after each window."""
    limits: list[int] = []
    w = rule.config.window_s
    t0 = rule.window_start
    n_windows = round(seconds / w)
    for k in range(n_windows):
        start = t0 + k * w
        errors = round(100 * error_rate)
        for i in range(100):
            rule.record(start + (i + 0.5) * w / 100, latency_s=latency, error=i < errors)
        rule.tick(start + w)
        limits.append(rule.limit)
    return limits


def test_errors_cut_by_a_fifth_with_a_hold():
    rule = AdaptiveConcurrency(AdaptiveConfig(baseline=50))
    limits = run_windows(rule, 80, error_rate=0.10)
    # a cut at the end of the first window, then the 30 s hold, then the next cut
    assert limits == [40, 40, 40, 32, 32, 32, 25, 25]


def test_health_raises_back_to_the_baseline_in_420_seconds():
    rule = AdaptiveConcurrency(AdaptiveConfig(baseline=50))
    run_windows(rule, 70, error_rate=0.10)
    assert rule.limit == 25
    hold_end = rule.hold_until
    assert hold_end == 100.0
    run_windows(rule, hold_end - rule.window_start)  # sit out the hold, healthy
    assert rule.limit == 25
    seen = [rule.limit]
    for _ in range(42):
        run_windows(rule, 10)
        if rule.limit != seen[-1]:
            seen.append(rule.limit)
    assert seen == [25, 28, 31, 35, 39, 43, 48, 50]
    assert rule.window_start == hold_end + 420
    run_windows(rule, 120)
    assert rule.limit == 50  # never above the baseline


def test_latency_cut_and_only_the_larger_cut_when_both_are_bad():
    rule = AdaptiveConcurrency(AdaptiveConfig(baseline=50))
    assert run_windows(rule, 30, latency=3.0) == [45, 40, 36]  # × 0.9, rounded down, no hold
    both = AdaptiveConcurrency(AdaptiveConfig(baseline=50))
    assert run_windows(both, 10, error_rate=0.5, latency=3.0) == [40]  # × 0.8 only, not × 0.72


def test_never_below_one_and_rounding():
    rule = AdaptiveConcurrency(AdaptiveConfig(baseline=2, hold_s=0.0))
    assert run_windows(rule, 30, error_rate=1.0) == [1, 1, 1]
    up = AdaptiveConcurrency(AdaptiveConfig(baseline=50), limit=10)
    run_windows(up, 60)
    assert up.limit == 11  # 10 × 1.1 = 11 exactly: rounding up must not make it 12
    run_windows(up, 60)
    assert up.limit == 13  # 12.1 rounds up


def test_exactly_five_percent_is_healthy():
    rule = AdaptiveConcurrency(AdaptiveConfig(baseline=50))
    assert run_windows(rule, 10, error_rate=0.05) == [50]
    assert run_windows(rule, 10, error_rate=0.06) == [40]


def test_idle_windows_count_as_healthy():
    rule = AdaptiveConcurrency(AdaptiveConfig(baseline=50), limit=20)
    verdicts = rule.tick(60.0)
    assert [v.after for v in verdicts][-1] == 22
    assert rule.limit == 22


# --- TokenBucket -------------------------------------------------------------------------------------


def test_debt_makes_the_next_caller_wait():
    bucket = TokenBucket.per_minute(100_000, now=0.0)
    assert bucket.rate == pytest.approx(1666.6666666666667)
    bucket.level = -7_000.0
    wait = bucket.reserve(0.0, 1_000)
    assert wait == pytest.approx(4.80, abs=1e-9)
    # the reservation is debited at once: the caller after it queues behind
    assert bucket.level == -8_000.0
    assert bucket.reserve(0.0, 1_000) == pytest.approx(5.40, abs=1e-9)


def test_admit_on_estimate_then_charge_the_real_amount():
    bucket = TokenBucket(rate=100.0, capacity=1_000.0, level=1_000.0)
    assert bucket.reserve(0.0, 800) == 0.0
    bucket.charge(0.0, 2_200 - 800)  # the call really used 2,200: the bucket goes into debt
    assert bucket.level == -1_200.0
    assert bucket.wait_for(0.0, 500) == pytest.approx(17.0)
    assert bucket.wait_for(10.0, 500) == pytest.approx(7.0)
    bucket.charge(10.0, -10_000)  # a refund never fills past capacity
    assert bucket.level == 1_000.0


def test_amounts_above_capacity_wait_only_for_a_full_bucket():
    bucket = TokenBucket(rate=10.0, capacity=100.0, level=0.0)
    assert bucket.reserve(0.0, 500) == pytest.approx(10.0)


def test_provider_remaining_lowers_the_level():
    bucket = TokenBucket(rate=10.0, capacity=100.0, level=100.0)
    bucket.observe(0.0, remaining=40)
    assert bucket.level == 40.0
    bucket.observe(0.0, remaining=90)
    assert bucket.level == 40.0
