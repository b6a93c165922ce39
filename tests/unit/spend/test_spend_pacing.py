"""Rate-limit headers read as meant, a concurrency cap learned from 429s, the retry budget's start
(all on a virtual clock, exact)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import RateLimited
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.pacing import HeaderWindow, learned_cap, window_state
from agent_fleet.spend.providers import RateSignals
from agent_fleet.spend.providers._wire import signals_from_headers
from agent_fleet.spend.retry import RetryBudget

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=100)


def test_a_window_refills_so_that_it_is_full_when_its_reset_says() -> None:
    w = HeaderWindow.read(10.0, limit=5, remaining=0, reset=1.0)
    assert w is not None and w.rate == 5.0
    assert w.reserve(10.0, 1) == pytest.approx(0.2)  # the first in line waits a fifth of the reset
    assert w.reserve(10.0, 1) == pytest.approx(0.4)  # the next one behind it
    assert w.level(12.0) == 5.0  # never above the limit
    half = HeaderWindow.read(0.0, limit=5, remaining=4, reset=1.0)
    assert half is not None and half.reserve(0.0, 1) == 0.0 and half.reserve(0.0, 1) == 0.0


def test_a_limit_without_its_reset_paces_nothing() -> None:
    assert HeaderWindow.read(0.0, limit=5, remaining=None, reset=None) is None
    assert HeaderWindow.read(0.0, limit=5, remaining=3, reset=None) is None
    assert window_state(RateSignals(limit_requests=5)) is None
    assert window_state(RateSignals(remaining_requests=0, remaining_tokens=900)) == "exhausted"
    assert window_state(RateSignals(remaining_requests=3)) == "room"


def test_reset_formats_openai_durations_and_anthropic_timestamps() -> None:
    openai = signals_from_headers(
        {
            "x-ratelimit-limit-requests": "5",
            "x-ratelimit-remaining-requests": "4",
            "x-ratelimit-reset-requests": "1s",
            "x-ratelimit-limit-tokens": "40000",
            "x-ratelimit-remaining-tokens": "30000",
            "x-ratelimit-reset-tokens": "6m0s",
            "retry-after": "2",
        }
    )
    assert openai is not None
    assert (openai.reset_requests, openai.reset_tokens, openai.retry_after) == (1.0, 360.0, 2.0)
    at = (datetime.now(UTC) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    anthropic = signals_from_headers(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": at,
        }
    )
    assert anthropic is not None and anthropic.remaining_requests == 0
    assert anthropic.reset_requests is not None and 28.0 < anthropic.reset_requests <= 30.0


class Windowed:
    """5 requests, restored at 5 a second (a bucket, as OpenAI meters), announced as OpenAI does: limit,
    remaining, and the time until it is full again; above it a 429."""

    name = "windowed"
    model = "m"

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.level = 5.0
        self.at = 0.0
        self.sent: list[float] = []
        self.refused: list[float] = []
        self.on_signals: Callable[[str, RateSignals], None] | None = None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        now = self.clock.now()
        self.level, self.at = min(5.0, self.level + (now - self.at) * 5.0), now
        ok = self.level >= 1.0 - 1e-9
        if ok:
            self.level -= 1.0
        signals = RateSignals(limit_requests=5, remaining_requests=int(self.level), reset_requests=(5 - self.level) / 5)
        assert self.on_signals is not None
        self.on_signals(request.model, signals)
        if not ok:
            self.refused.append(now)
            raise RateLimited("429", status=429, retry_after=(1.0 - self.level) / 5)
        self.sent.append(now)
        await self.clock.sleep(0.05)
        return ChatResponse(content="ok", usage=Usage(10, 5), model="m")

    async def aclose(self) -> None:
        return None


async def test_limit_5_with_a_1s_reset_is_5_a_second_not_5_a_minute() -> None:
    clock = VirtualClock()
    provider = Windowed(clock)
    gw = Gateway(provider, clock=clock, session_tokens=None, adaptive=False, rand=lambda: 0.0)
    async with clock.auto_advance():
        await asyncio.gather(*(gw.complete(f"s{i}", REQ) for i in range(50)))
    assert len(provider.sent) == 50
    # 5 at once, then 5 a second: 9 s for the other 45 (read as 5 a minute it would take 9 minutes)
    assert max(provider.sent) == pytest.approx(9.0, abs=0.3)
    assert provider.refused == []  # paced by the headers, not by 429s


class Capped:
    """At most 5 calls at once; above it a 429 whose headers show room left in every window."""

    name = "capped"
    model = "m"

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.in_flight = 0
        self.peak = 0
        self.ok = 0
        self.refused = 0
        self.on_signals: Callable[[str, RateSignals], None] | None = None

    async def complete(self, request: ChatRequest) -> ChatResponse:
        assert self.on_signals is not None
        self.on_signals(request.model, RateSignals(limit_requests=10_000, remaining_requests=9_000, reset_requests=0.1))
        if self.in_flight >= 5:
            self.refused += 1
            raise RateLimited("429 concurrency", status=429, retry_after=1.0)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.clock.sleep(1.0)
        finally:
            self.in_flight -= 1
        self.ok += 1
        return ChatResponse(content="ok", usage=Usage(10, 5), model="m")

    async def aclose(self) -> None:
        return None


async def test_a_concurrency_cap_is_learned_from_429s_with_room_left() -> None:
    clock = VirtualClock()
    provider = Capped(clock)
    gw = Gateway(provider, clock=clock, session_tokens=None, rand=lambda: 0.0)
    assert gw.limiter.total == 50
    async with clock.auto_advance():
        await asyncio.gather(*(gw.complete(f"s{i}", REQ) for i in range(40)))
    assert provider.ok == 40 and provider.peak == 5
    assert gw.limiter.total == 5  # learned: the calls on the wire at the 429, less one
    assert provider.refused == 1  # the sixth call on the wire taught the cap; none refused after
    assert clock.now() == pytest.approx(8.0)  # 40 calls, 5 at a time, 1 s each


def test_learned_cap_is_the_concurrency_less_one() -> None:
    assert (learned_cap(6), learned_cap(1), learned_cap(0)) == (5, 1, 1)


def test_the_retry_budget_starts_at_its_configured_size_on_a_monotonic_clock() -> None:
    budget = RetryBudget(balance=10.0, min_per_s=1.0)
    now = 1_234_567.0  # a monotonic clock's reading is far from 0
    assert [budget.try_retry(now) for _ in range(11)] == [True] * 10 + [False]
    assert budget.try_retry(now + 1.0) and not budget.try_retry(now + 1.0)  # then 1 a second
