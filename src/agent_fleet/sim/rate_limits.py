"""The simulated provider's hidden capacity, its rate-limit headers, prompt cache and counters.

Capacity is enforced with sliding one-minute windows (requests, and tokens in + out) and a concurrency
cap. A refused request is not recorded in any window, so refusals never eat into the capacity they were
refused for. All decisions read time from an injected :class:`~agent_fleet.clock.Clock`.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_fleet.clock import Clock
from agent_fleet.sim.conversation import Conversation
from agent_fleet.sim.settings import SimConfig

__all__ = [
    "NOMINAL_RPM",
    "NOMINAL_TPM",
    "Capacity",
    "PromptCache",
    "Refusal",
    "SimStats",
    "SlidingWindow",
    "format_duration",
    "format_rfc3339",
]

WINDOW_SECONDS = 60.0
# Limits shown in the headers when no limit is configured (nothing is enforced then): a high
# usage tier's figures for a small model, so a client that paces itself by the headers is not
# held back below what an unlimited server can serve.
NOMINAL_RPM = 30_000
NOMINAL_TPM = 150_000_000


class SlidingWindow:
    """Sum of the amounts recorded during the last ``span`` seconds."""

    __slots__ = ("_entries", "_span", "_total")

    def __init__(self, span: float = WINDOW_SECONDS) -> None:
        self._span = span
        self._entries: deque[tuple[float, int]] = deque()
        self._total = 0

    def _prune(self, now: float) -> None:
        horizon = now - self._span
        entries = self._entries
        while entries and entries[0][0] <= horizon:
            self._total -= entries.popleft()[1]

    def add(self, now: float, amount: int) -> None:
        if amount:
            self._entries.append((now, amount))
            self._total += amount

    def total(self, now: float) -> int:
        self._prune(now)
        return self._total

    def seconds_until_fits(self, now: float, need: int, limit: int) -> float:
        """How long until ``need`` more fits under ``limit``; the full span if it never can."""
        self._prune(now)
        if self._total + need <= limit:
            return 0.0
        if need > limit:
            return self._span
        excess = self._total + need - limit
        for t, amount in self._entries:
            excess -= amount
            if excess <= 0:
                return t + self._span - now
        return self._span

    def seconds_until_empty(self, now: float) -> float:
        self._prune(now)
        return self._entries[-1][0] + self._span - now if self._entries else 0.0

    def clear(self) -> None:
        self._entries.clear()
        self._total = 0


@dataclass(frozen=True, slots=True)
class Refusal:
    reason: str  # "concurrency" | "rpm" | "tpm"
    retry_after: float
    limit: int
    used: int


def format_duration(seconds: float) -> str:
    """A duration in OpenAI's header spelling: ``12ms``, ``1s``, ``1.5s``, ``6m0s``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{round(seconds, 3):g}s"
    minutes = int(seconds // 60)
    rest = round(seconds - minutes * 60, 3)
    return f"{minutes}m{rest:g}s"


def format_rfc3339(epoch_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.ceil(epoch_seconds)))


class Capacity:
    """Concurrency, requests-per-minute and tokens-per-minute, as a real provider would meter them."""

    def __init__(self, config: SimConfig, clock: Clock, *, wall: Callable[[], float] = time.time) -> None:
        self._config = config
        self._clock = clock
        self._wall = wall
        self.in_flight = 0
        self.max_in_flight = 0
        self._requests = SlidingWindow()
        self._tokens = SlidingWindow()
        self._input = SlidingWindow()
        self._output = SlidingWindow()

    @property
    def rpm_limit(self) -> int:
        return self._config.rpm if self._config.rpm is not None else NOMINAL_RPM

    @property
    def tpm_limit(self) -> int:
        return self._config.tpm if self._config.tpm is not None else NOMINAL_TPM

    def try_admit(self, prompt_tokens: int) -> Refusal | None:
        """Admit one request (counted in flight and in the windows) or say why not."""
        cfg = self._config
        now = self._clock.now()
        if cfg.max_concurrency is not None and self.in_flight >= cfg.max_concurrency:
            return Refusal("concurrency", 1.0, cfg.max_concurrency, self.in_flight)
        if cfg.rpm is not None:
            wait = self._requests.seconds_until_fits(now, 1, cfg.rpm)
            if wait > 0:
                return Refusal("rpm", wait, cfg.rpm, self._requests.total(now))
        if cfg.tpm is not None:
            wait = self._tokens.seconds_until_fits(now, prompt_tokens, cfg.tpm)
            if wait > 0:
                return Refusal("tpm", wait, cfg.tpm, self._tokens.total(now))
        self._requests.add(now, 1)
        self._tokens.add(now, prompt_tokens)
        self._input.add(now, prompt_tokens)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return None

    def release(self, output_tokens: int) -> None:
        now = self._clock.now()
        self._tokens.add(now, output_tokens)
        self._output.add(now, output_tokens)
        self.in_flight -= 1

    def reset(self) -> None:
        for window in (self._requests, self._tokens, self._input, self._output):
            window.clear()
        self.max_in_flight = self.in_flight

    def openai_headers(self) -> dict[str, str]:
        now = self._clock.now()
        rpm, tpm = self.rpm_limit, self.tpm_limit
        return {
            "x-ratelimit-limit-requests": str(rpm),
            "x-ratelimit-remaining-requests": str(max(0, rpm - self._requests.total(now))),
            "x-ratelimit-reset-requests": format_duration(self._requests.seconds_until_empty(now)),
            "x-ratelimit-limit-tokens": str(tpm),
            "x-ratelimit-remaining-tokens": str(max(0, tpm - self._tokens.total(now))),
            "x-ratelimit-reset-tokens": format_duration(self._tokens.seconds_until_empty(now)),
        }

    def anthropic_headers(self) -> dict[str, str]:
        now = self._clock.now()
        wall = self._wall()
        rpm, tpm = self.rpm_limit, self.tpm_limit
        headers = {
            "anthropic-ratelimit-requests-limit": str(rpm),
            "anthropic-ratelimit-requests-remaining": str(max(0, rpm - self._requests.total(now))),
            "anthropic-ratelimit-requests-reset": format_rfc3339(wall + self._requests.seconds_until_empty(now)),
        }
        for name, window in (("tokens", self._tokens), ("input-tokens", self._input), ("output-tokens", self._output)):
            # Anthropic rounds token remaining values; down to the thousand, so they never overstate.
            remaining = max(0, tpm - window.total(now)) // 1000 * 1000
            headers[f"anthropic-ratelimit-{name}-limit"] = str(tpm)
            headers[f"anthropic-ratelimit-{name}-remaining"] = str(remaining)
            headers[f"anthropic-ratelimit-{name}-reset"] = format_rfc3339(wall + window.seconds_until_empty(now))
        return headers


class PromptCache:
    """Remembers served prompt prefixes (bounded LRU of prefix digests).

    A request's cached tokens are the tokens of its longest prefix, ending before its last message, that
    an earlier request already contained, provided that prefix is at least ``min_tokens`` long.
    """

    def __init__(self, *, max_entries: int, min_tokens: int) -> None:
        self._max = max_entries
        self._min = min_tokens
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def lookup_and_store(self, conv: Conversation) -> int:
        cached = 0
        chain = conv.chain
        for k in range(len(chain) - 2, -1, -1):
            digest, tokens = chain[k]
            if tokens < self._min:
                break
            if digest in self._seen:
                cached = tokens
                break
        seen = self._seen
        for digest, _ in chain:
            if digest in seen:
                seen.move_to_end(digest)
            else:
                seen[digest] = None
        while len(seen) > self._max:
            seen.popitem(last=False)
        return cached

    def clear(self) -> None:
        self._seen.clear()


class SimStats:
    """Counters served at ``GET /sim/stats``."""

    def __init__(self) -> None:
        self.requests: dict[str, dict[str, int]] = {}
        self.rate_limited: dict[str, int] = {}
        self.tokens_in = 0
        self.tokens_out = 0
        self.cached_tokens = 0
        self.stalls = 0
        self.dropped = 0
        self.plans = 0  # answers that were a plan (a planner's submit_plan call)
        # with SimConfig.bill_by_conversation: tokens billed per first user message (one agent session's)
        self.billed_by_conversation: dict[str, int] = {}

    def count(self, endpoint: str, status: int) -> None:
        by_status = self.requests.setdefault(endpoint, {})
        key = str(status)
        by_status[key] = by_status.get(key, 0) + 1

    def limited(self, reason: str) -> None:
        self.rate_limited[reason] = self.rate_limited.get(reason, 0) + 1

    def snapshot(self, capacity: Capacity) -> dict[str, Any]:
        total = sum(sum(v.values()) for v in self.requests.values())
        return {
            "requests_total": total,
            "requests": {k: dict(v) for k, v in self.requests.items()},
            "in_flight": capacity.in_flight,
            "max_in_flight": capacity.max_in_flight,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cached_tokens": self.cached_tokens,
            "rate_limited": dict(self.rate_limited),
            "stalls": self.stalls,
            "dropped": self.dropped,
            "plans": self.plans,
            **({"billed_by_conversation": dict(self.billed_by_conversation)} if self.billed_by_conversation else {}),
        }
