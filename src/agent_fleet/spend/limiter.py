"""Capacity primitives of the gateway: a concurrency limiter, its adaptive policy, token buckets with debt.

* :class:`ConcurrencyLimiter` is the engine's :class:`~agent_fleet.capacity.CapacityLimiter` (trio's
  surface, Temporal's reserve → mark used → release): a call reserves a permit for its session,
  marks it used when it goes on the wire, and releases it when it ends.
* :class:`AdaptiveConcurrency` is the pure rule that moves the limit (module docstring of its own).
* :class:`TokenBucket` admits on an estimate and is charged the real amount afterwards; its level
  may go negative (debt), and later callers wait the debt off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from agent_fleet.capacity import CapacityFull, CapacityLimiter, CapacityStatistics

__all__ = [
    "AdaptiveConcurrency",
    "AdaptiveConfig",
    "ConcurrencyLimiter",
    "LimiterFull",
    "LimiterStatistics",
    "TokenBucket",
    "WindowVerdict",
]


LimiterFull = CapacityFull  # ``acquire_nowait`` found no free permit
LimiterStatistics = CapacityStatistics


class ConcurrencyLimiter(CapacityLimiter):
    """At most ``total`` provider calls at once; permits are taken on behalf of a session.

    The adaptive rule sets ``total``: raising it wakes waiters at once, lowering it revokes
    nothing. Reserved permits are calls waiting on the breaker or the rate buckets; in use, calls
    on the wire.
    """

    def __init__(self, total: int = 50) -> None:
        super().__init__(total, name="concurrency permits")


# --- the adaptive rule -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveConfig:
    """The adaptive rule's figures (SPEC defaults)."""

    baseline: int = 50
    window_s: float = 10.0
    max_error_rate: float = 0.05
    max_mean_latency_s: float = 2.0
    error_cut: Fraction = Fraction(8, 10)
    latency_cut: Fraction = Fraction(9, 10)
    raise_by: Fraction = Fraction(11, 10)
    hold_s: float = 30.0
    healthy_for_s: float = 60.0


@dataclass(frozen=True, slots=True)
class WindowVerdict:
    """What one evaluation window decided (kept for tests and events)."""

    at: float
    calls: int
    error_rate: float
    mean_latency_s: float | None
    before: int
    after: int
    reason: str  # "error_rate" | "latency" | "healthy" | "hold" | "steady"


@dataclass(slots=True)
class AdaptiveConcurrency:
    """The concurrency rule, evaluated once per window (pure: times come in as arguments).

    At the end of every window of ``window_s`` seconds:

    * during a hold (``hold_s`` after an error cut) the limit does not move;
    * error rate > 5 %: limit × 0.8, rounded down, then hold 30 s;
    * else mean latency > 2 s: limit × 0.9, rounded down (no hold);
      when both are bad only the larger cut (× 0.8) applies;
    * else the window is healthy; after ``healthy_for_s`` of consecutive healthy time the limit is
      × 1.1, rounded up, capped at the baseline, and the healthy clock starts again;
    * the limit never goes below 1.

    A window without calls is healthy. Errors are 429s, 5xx/529 and timeouts; latency is that of
    successful calls.
    """

    config: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    start: float = 0.0
    limit: int = 0
    window_start: float = 0.0
    hold_until: float = float("-inf")
    healthy_since: float | None = None
    calls: int = 0
    errors: int = 0
    latency_sum: float = 0.0
    latency_n: int = 0

    def __post_init__(self) -> None:
        if self.limit <= 0:
            self.limit = self.config.baseline
        self.window_start = self.start

    def record(self, now: float, *, latency_s: float | None = None, error: bool = False) -> list[WindowVerdict]:
        """Count one outcome at ``now`` (closing any windows that ended before it)."""
        verdicts = self.tick(now)
        self.calls += 1
        if error:
            self.errors += 1
        elif latency_s is not None:
            self.latency_sum += latency_s
            self.latency_n += 1
        return verdicts

    def tick(self, now: float) -> list[WindowVerdict]:
        """Close every window that has ended by ``now``; returns what each decided."""
        out: list[WindowVerdict] = []
        w = self.config.window_s
        if now - self.window_start > 1000 * w:
            # A long idle gap: close the open window, then skip empty (healthy) windows in bulk.
            out.append(self._close(self.window_start + w))
            self.window_start += max(0, math.floor((now - self.window_start) / w) - 1000) * w
        while now >= self.window_start + w - 1e-9:
            out.append(self._close(self.window_start + w))
        return out

    def cap(self, limit: int) -> None:
        """A concurrency the provider showed it will not take: at most ``limit`` from now on (until
        healthy windows raise it again, the way they raise any cut)."""
        if limit < self.limit:
            self.limit = max(1, limit)
            self.healthy_since = None

    def set_baseline(self, baseline: int) -> None:
        if baseline < 1:
            raise ValueError("the baseline concurrency is at least 1")
        self.config = AdaptiveConfig(
            baseline=baseline,
            window_s=self.config.window_s,
            max_error_rate=self.config.max_error_rate,
            max_mean_latency_s=self.config.max_mean_latency_s,
            error_cut=self.config.error_cut,
            latency_cut=self.config.latency_cut,
            raise_by=self.config.raise_by,
            hold_s=self.config.hold_s,
            healthy_for_s=self.config.healthy_for_s,
        )
        self.limit = min(self.limit, baseline)

    def _close(self, end: float) -> WindowVerdict:
        c = self.config
        start = self.window_start
        calls, errors = self.calls, self.errors
        rate = errors / calls if calls else 0.0
        mean = self.latency_sum / self.latency_n if self.latency_n else None
        self.window_start = end
        self.calls = self.errors = self.latency_n = 0
        self.latency_sum = 0.0
        before = self.limit
        if end < self.hold_until - 1e-9:
            self.healthy_since = None
            return WindowVerdict(end, calls, rate, mean, before, before, "hold")
        error_bad = rate > c.max_error_rate
        latency_bad = mean is not None and mean > c.max_mean_latency_s
        if error_bad or latency_bad:
            factor = min(c.error_cut if error_bad else Fraction(1), c.latency_cut if latency_bad else Fraction(1))
            self.limit = max(1, math.floor(self.limit * factor))
            self.healthy_since = None
            if error_bad:
                self.hold_until = end + c.hold_s
            return WindowVerdict(end, calls, rate, mean, before, self.limit, "error_rate" if error_bad else "latency")
        if self.healthy_since is None:
            self.healthy_since = max(start, self.hold_until)
        if end - self.healthy_since >= c.healthy_for_s - 1e-9 and self.limit < c.baseline:
            self.limit = min(c.baseline, math.ceil(self.limit * c.raise_by))
            self.healthy_since = end
            return WindowVerdict(end, calls, rate, mean, before, self.limit, "healthy")
        if self.limit > c.baseline:
            self.limit = c.baseline
        return WindowVerdict(end, calls, rate, mean, before, self.limit, "steady")


# --- token buckets with debt --------------------------------------------------------------------


@dataclass(slots=True)
class TokenBucket:
    """Requests or tokens per second, admitting on an estimate and charged the real amount afterwards.

    :meth:`reserve` debits the estimate *now* and returns how long the caller must wait first: zero when
    the level covers the amount, else the time for the refill to bring the level (which may be negative:
    debt) up to the amount. Debiting at reservation time makes later callers queue behind earlier ones.
    Amounts above ``capacity`` wait only until the bucket is full, so nothing waits forever.
    """

    rate: float  # units per second
    capacity: float
    level: float = 0.0
    updated: float = 0.0

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.capacity <= 0:
            raise ValueError("a token bucket needs a positive rate and capacity")

    @classmethod
    def per_minute(cls, limit: float, *, now: float = 0.0, burst_s: float = 60.0) -> TokenBucket:
        rate = limit / 60.0
        cap = rate * burst_s
        return cls(rate=rate, capacity=cap, level=cap, updated=now)

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now

    def wait_for(self, now: float, amount: float) -> float:
        """Seconds until ``amount`` would be admitted, without reserving it."""
        self._refill(now)
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def reserve(self, now: float, amount: float) -> float:
        wait = self.wait_for(now, amount)
        self.level -= amount
        return wait

    def charge(self, now: float, delta: float) -> None:
        """Settle a reservation: ``delta`` = real − estimated (negative gives tokens back)."""
        self._refill(now)
        self.level = min(self.capacity, self.level - delta)

    def observe(self, now: float, *, remaining: float | None) -> None:
        """The provider says this much is left: never believe we have more than it does."""
        self._refill(now)
        if remaining is not None and remaining < self.level:
            self.level = remaining

    def __repr__(self) -> str:
        return f"<TokenBucket level={self.level:.1f}/{self.capacity:.1f} rate={self.rate:.3f}/s>"
