"""Retry decisions (pure values; the caller sleeps) and the retry budget.

What is retried: 429 (honouring retry-after), 5xx/529 overload (jittered exponential backoff) and
connection failures before anything was sent. Never retried: spend/quota exhausted, other 4xx, and a
timeout after the request went out (it may have been processed and billed; the caller decides).

The :class:`RetryBudget` stops retries from feeding a cascade: each first attempt deposits ``ratio``
of a retry, each retry withdraws one, plus a small floor of ``min_per_s`` retries per second, so under
a storm retries add at most ``ratio`` to the offered load.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_fleet.errors import Overloaded, ProviderUnreachable, RateLimited

__all__ = ["RetryBudget", "RetryPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 4  # first attempt included
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.5  # a delay is scaled by a factor drawn in [1 - jitter, 1]

    def delay(self, attempt: int, error: BaseException, rand: float) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1), or None to stop.

        ``rand`` in [0, 1) is injected so tests are exact.
        """
        if attempt >= self.max_attempts:
            return None
        unsent = isinstance(error, ProviderUnreachable) and not getattr(error, "sent", False)
        if not (isinstance(error, RateLimited | Overloaded) or unsent):
            return None
        backoff = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        backoff *= 1.0 - self.jitter * rand
        retry_after: float | None = getattr(error, "retry_after", None)
        if retry_after is not None:
            # The provider said how long: retrying earlier fails; never wait less.
            backoff = max(backoff, min(retry_after, 600.0))
        return backoff


@dataclass(slots=True)
class RetryBudget:
    ratio: float = 0.2
    min_per_s: float = 1.0
    max_balance: float = 100.0
    balance: float = 10.0  # the budget's configured starting size
    updated: float | None = None  # None until first used: a monotonic clock does not start at 0

    def _refill(self, now: float) -> None:
        if self.updated is None:
            self.updated = now
        elif now > self.updated:
            self.balance = min(self.max_balance, self.balance + (now - self.updated) * self.min_per_s)
            self.updated = now

    def on_request(self, now: float) -> None:
        self._refill(now)
        self.balance = min(self.max_balance, self.balance + self.ratio)

    def try_retry(self, now: float) -> bool:
        self._refill(now)
        if self.balance >= 1.0:
            self.balance -= 1.0
            return True
        return False
