"""Pacing from the provider's rate-limit headers, read as the providers document them (pure).

OpenAI sends ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, the reset a duration (``1s``,
``6m0s``, ``12ms``) until the limit is back to its initial state; Anthropic sends
``anthropic-ratelimit-*-{limit,remaining,reset}``, the reset an RFC 3339 time when it is fully
replenished; both send ``retry-after`` (seconds) on a 429. :mod:`agent_fleet.spend.providers._wire`
turns them into :class:`~agent_fleet.spend.providers.RateSignals` (resets as seconds from now).

What the gateway takes from them::

    remaining + reset   a window: ``remaining`` now, refilled at (limit - remaining) / reset per second,
                        so it is full again exactly when ``reset`` says; calls are admitted while it holds
                        their amount, then wait for the refill — never longer than the reset says for
                        the first one in line
    limit alone         nothing: a limit without its reset does not say over how long (a "5" with a 1 s
                        reset is not 5 a minute)
    retry-after         on a 429 whose headers say the window is used up: nobody sends to the model
                        before it (the breaker's cooldown); otherwise only that request waits
    429, room left      (``remaining`` > 0, or no headers) under load: a concurrency cap; the calls on the
                        wire when it came, less one, become the limit (:func:`learned_cap`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["HeaderWindow", "learned_cap", "window_state", "windows_from"]


@dataclass(slots=True)
class HeaderWindow:
    """One limit (requests or tokens) as the provider's last headers and our sends since describe it."""

    limit: float
    remaining: float  # after our own reservations since ``updated`` (may go negative: calls queued)
    rate: float  # units restored per second; 0 when the headers said the window was full
    updated: float

    @classmethod
    def read(
        cls, now: float, *, limit: float | None, remaining: float | None, reset: float | None
    ) -> HeaderWindow | None:
        """The window the headers describe, or None when they lack ``remaining`` or ``reset``."""
        if remaining is None or reset is None:
            return None
        top = max(float(limit) if limit else float(remaining), float(remaining))
        used = top - remaining
        rate = used / reset if reset > 0 and used > 0 else (float("inf") if used > 0 else 0.0)
        return cls(limit=top, remaining=float(remaining), rate=rate, updated=now)

    def level(self, now: float) -> float:
        if self.rate == float("inf"):
            return self.limit
        return min(self.limit, self.remaining + max(0.0, now - self.updated) * self.rate)

    def reserve(self, now: float, amount: float) -> float:
        """Take ``amount`` (a request, a call's tokens); returns the seconds to wait before sending."""
        amount = min(amount, self.limit)  # more than the whole limit waits only for a full window
        have = self.level(now)
        self.remaining = have - amount
        self.updated = now
        if have >= amount:
            return 0.0
        if self.rate <= 0:
            return 0.0  # full by the headers, used up by our own sends: the next answer says more
        return (amount - have) / self.rate

    def give_back(self, now: float, amount: float) -> None:
        """Return (positive) or take (negative) units after the fact: a refund, the real token count."""
        self.remaining = min(self.limit, self.level(now) + amount)
        self.updated = now

    @property
    def exhausted(self) -> bool:
        return self.remaining <= 0


def windows_from(now: float, signals: Any) -> tuple[HeaderWindow | None, HeaderWindow | None]:
    """(requests, tokens) windows from one response's signals."""
    requests = HeaderWindow.read(
        now, limit=signals.limit_requests, remaining=signals.remaining_requests, reset=signals.reset_requests
    )
    tokens = HeaderWindow.read(
        now, limit=signals.limit_tokens, remaining=signals.remaining_tokens, reset=signals.reset_tokens
    )
    return requests, tokens


def window_state(signals: Any) -> str | None:
    """``"exhausted"`` when the headers say a requests or tokens window is used up, ``"room"`` when
    they show room in every window they name, None when they name none."""
    left = [v for v in (signals.remaining_requests, signals.remaining_tokens) if v is not None]
    if not left:
        return None
    return "exhausted" if any(v <= 0 for v in left) else "room"


def learned_cap(on_the_wire: int) -> int:
    """The concurrency a 429 with room left in every window teaches: the calls on the wire when it
    came (itself included) were one too many."""
    return max(1, on_the_wire - 1)
