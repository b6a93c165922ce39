"""The concurrency limiter, the adaptive rule and the token bucket with debt, on exact values."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet.spend.limiter import (
    AdaptiveConcurrency,
    AdaptiveConfig,
    ConcurrencyLimiter,
    LimiterFull,
    TokenBucket,
)

# --- ConcurrencyLimiter ---------------------------------------------------------------------------


async def test_limiter_never_admits_more_than_its_total():
    lim = ConcurrencyLimiter(3)
    peak = 0
    active = 0

    async def worker(i: int) -> None:
        nonlocal peak, active
        await lim.acquire(f"s{i % 4}")
        try:
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        finally:
            active -= 1
            lim.release(f"s{i % 4}")

    async with asyncio.TaskGroup() as tg:
        for i in range(50):
            tg.create_task(worker(i))
    assert peak == 3
    assert lim.statistics().borrowed_tokens == 0
    assert lim.statistics().borrowers == {}


async def test_limiter_surface_and_fifo_handoff():
    lim = ConcurrencyLimiter(1)
    lim.acquire_nowait("a")
    with pytest.raises(LimiterFull):
        lim.acquire_nowait("b")
    order: list[str] = []

    async def waiter(name: str) -> None:
        await lim.acquire(name)
        order.append(name)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(waiter("b"))
        tg.create_task(waiter("c"))
        await asyncio.sleep(0)
        assert lim.statistics().tasks_waiting == 2
        assert repr(lim) == "<ConcurrencyLimiter 1/1 borrowed, 2 waiting>"
        lim.release("a")
        await asyncio.sleep(0)
        # a newcomer cannot barge past the waiters
        with pytest.raises(LimiterFull):
            lim.acquire_nowait("z")
        lim.release("b")
    assert order == ["b", "c"]
    stats = lim.statistics()
    assert (stats.borrowed_tokens, stats.total_tokens, stats.borrowers) == (1, 1, {"c": 1})
    with pytest.raises(RuntimeError):
        lim.release("nobody")


async def test_raising_total_wakes_waiters_and_lowering_revokes_nothing():
    lim = ConcurrencyLimiter(1)
    lim.acquire_nowait("a")
    got: list[str] = []

    async def waiter(name: str) -> None:
        await lim.acquire(name)
        got.append(name)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(waiter("b"))
        tg.create_task(waiter("c"))
        await asyncio.sleep(0)
        lim.total = 3
        await asyncio.sleep(0)
    assert got == ["b", "c"]
    lim.total = 1
    assert lim.borrowed_tokens == 3 and lim.available_tokens == 0
    with pytest.raises(ValueError):
        lim.total = 0


async def test_cancelled_waiter_leaks_no_permit():
    lim = ConcurrencyLimiter(1)
    lim.acquire_nowait("a")
    task = asyncio.create_task(lim.acquire("b"))
    await asyncio.sleep(0)
    # hand the permit over and cancel in the same step: the permit must come back
    lim.release("a")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lim.borrowed_tokens == 0
    lim.acquire_nowait("c")
    assert lim.statistics().borrowers == {"c": 1}


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
