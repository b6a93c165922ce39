"""Hidden capacity, rate-limit headers and the prompt cache, on a virtual clock."""

from __future__ import annotations

from typing import Any

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.sim.conversation import from_openai
from agent_fleet.sim.rate_limits import (
    NOMINAL_RPM,
    Capacity,
    PromptCache,
    SlidingWindow,
    format_duration,
    format_rfc3339,
)
from agent_fleet.sim.settings import SimConfig


def test_sliding_window_forgets_after_its_span() -> None:
    w = SlidingWindow(60.0)
    w.add(0.0, 10)
    w.add(20.0, 5)
    assert w.total(59.9) == 15
    assert w.total(60.0) == 5
    assert w.total(80.0) == 0


def test_sliding_window_says_when_an_amount_fits() -> None:
    w = SlidingWindow(60.0)
    w.add(0.0, 6)
    w.add(10.0, 3)
    w.add(30.0, 1)
    assert w.seconds_until_fits(40.0, 0, 10) == 0.0
    assert w.seconds_until_fits(40.0, 1, 10) == 20.0  # the entry at t=0 must leave
    assert w.seconds_until_fits(40.0, 8, 10) == 30.0  # entries at 0 and 10 must leave
    assert w.seconds_until_fits(40.0, 11, 10) == 60.0  # never fits: a full span
    assert w.seconds_until_empty(40.0) == 50.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.012, "12ms"),
        (0.0004, "1ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (59.25, "59.25s"),
        (360, "6m0s"),
        (90.5, "1m30.5s"),
    ],
)
def test_durations_use_openai_spelling(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_rfc3339_is_utc_with_z() -> None:
    assert format_rfc3339(0) == "1970-01-01T00:00:00Z"
    assert format_rfc3339(86_400.2) == "1970-01-02T00:00:01Z"


def test_concurrency_cap_refuses_only_above_it_and_release_frees_a_slot() -> None:
    clock = VirtualClock()
    cap = Capacity(SimConfig(max_concurrency=2), clock)
    assert cap.try_admit(10) is None
    assert cap.try_admit(10) is None
    refusal = cap.try_admit(10)
    assert refusal is not None and refusal.reason == "concurrency"
    cap.release(5)
    assert cap.try_admit(10) is None
    assert cap.in_flight == 2 and cap.max_in_flight == 2


def test_rpm_refusal_carries_exact_retry_after_and_is_not_counted() -> None:
    clock = VirtualClock()
    cap = Capacity(SimConfig(rpm=3), clock)
    for t in (0.0, 5.0, 10.0):
        clock.set(t)
        assert cap.try_admit(1) is None
        cap.release(1)
    clock.set(30.0)
    refusal = cap.try_admit(1)
    assert refusal is not None
    assert (refusal.reason, refusal.retry_after, refusal.limit, refusal.used) == ("rpm", 30.0, 3, 3)
    clock.set(59.0)
    assert cap.try_admit(1) is not None  # refusals did not extend the window
    clock.set(60.0)
    assert cap.try_admit(1) is None


def test_tpm_counts_prompt_at_admission_and_output_at_release() -> None:
    clock = VirtualClock()
    cap = Capacity(SimConfig(tpm=1000), clock)
    assert cap.try_admit(600) is None
    clock.set(1.0)
    cap.release(300)
    refusal = cap.try_admit(101)
    assert refusal is not None and refusal.reason == "tpm"
    assert refusal.retry_after == 59.0  # the 600 admitted at t=0 leave at t=60
    assert cap.try_admit(100) is None


def test_headers_show_limits_remaining_and_resets() -> None:
    clock = VirtualClock()
    cap = Capacity(SimConfig(rpm=100, tpm=50_000), clock, wall=lambda: 1_700_000_000.0)
    cap.try_admit(1200)
    clock.set(12.0)
    cap.release(300)
    h = cap.openai_headers()
    assert h["x-ratelimit-limit-requests"] == "100"
    assert h["x-ratelimit-remaining-requests"] == "99"
    assert h["x-ratelimit-reset-requests"] == "48s"
    assert h["x-ratelimit-limit-tokens"] == "50000"
    assert h["x-ratelimit-remaining-tokens"] == str(50_000 - 1500)
    assert h["x-ratelimit-reset-tokens"] == "1m0s"
    a = cap.anthropic_headers()
    assert a["anthropic-ratelimit-requests-remaining"] == "99"
    assert a["anthropic-ratelimit-requests-reset"] == format_rfc3339(1_700_000_000.0 + 48.0)
    assert a["anthropic-ratelimit-input-tokens-remaining"] == "48000"  # 50000 - 1200, rounded down
    assert a["anthropic-ratelimit-output-tokens-remaining"] == "49000"  # 50000 - 300, rounded down
    assert a["anthropic-ratelimit-tokens-limit"] == "50000"


def test_unlimited_capacity_shows_nominal_limits() -> None:
    cap = Capacity(SimConfig(), VirtualClock())
    assert cap.openai_headers()["x-ratelimit-limit-requests"] == str(NOMINAL_RPM)
    for _ in range(50):
        assert cap.try_admit(100_000) is None


def _conv(messages: list[dict[str, Any]]) -> Any:
    return from_openai({"model": "m", "messages": messages})


def test_prompt_cache_reports_the_longest_served_prefix() -> None:
    cache = PromptCache(max_entries=100, min_tokens=1024)
    long_text = "word " * 1000  # 5000 chars, 1250 tokens
    first = [{"role": "user", "content": long_text}]
    conv1 = _conv(first)
    assert cache.lookup_and_store(conv1) == 0
    second = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    conv2 = _conv(second)
    assert cache.lookup_and_store(conv2) == conv1.prompt_tokens
    # the same request again: everything but the last message was served before
    assert cache.lookup_and_store(conv2) == conv2.chain[-2][1]


def test_prompt_cache_ignores_short_prefixes_and_evicts_old_entries() -> None:
    cache = PromptCache(max_entries=2, min_tokens=1024)
    short = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "x"},
    ]
    cache.lookup_and_store(_conv(short))
    assert cache.lookup_and_store(_conv(short)) == 0
    long_msgs = [{"role": "user", "content": "a " * 3000}, {"role": "user", "content": "b"}]
    cache.lookup_and_store(_conv(long_msgs))
    assert cache.lookup_and_store(_conv(long_msgs)) > 0
    for i in range(3):
        cache.lookup_and_store(_conv([{"role": "user", "content": f"other {i}"}]))
    assert cache.lookup_and_store(_conv(long_msgs)) == 0
