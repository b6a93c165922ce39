"""A call's retry fate as one pure decision (the caller sleeps), and the retry budget.

After each failed attempt :meth:`RetryPolicy.decide` returns what happens next, as a value:

* :class:`Retry` — send again after ``after`` seconds; ``requeue``: return the concurrency permit while
  waiting and queue for a new one (a 429 the provider's headers show as a concurrency cap);
  ``draws_budget``: the retry adds load and withdraws one from the lane's retry budget.
* :class:`GiveUp` — the error goes to the caller, with the reason and, when another model may take
  the call, why (``fallback``, the router's cause; see :func:`fallback_cause`).

The rule, in order: out of quota gives up (the model is used up for every call); so does a timeout
after the request went out (it may have been processed and billed: never sent twice); a client that
retries itself is sent once; then the attempt count (``max_attempts``, first attempt included); errors
that are not retryable (other 4xx, refused credentials, a malformed answer) give up. What is retried:
429 (honouring retry-after), 5xx/529 overload (jittered exponential backoff) and connection failures
before anything was sent. A retry waiting on the provider's own windows (a learned cap, or a used-up
window until its reset) adds no load and does not draw on the retry budget; any other retry needs room
in it.

The :class:`RetryBudget` stops retries from feeding a cascade: each first attempt deposits ``ratio``
of a retry, each retry withdraws one, plus a small floor of ``min_per_s`` retries per second, so under
a storm retries add at most ``ratio`` to the offered load.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from agent_fleet.domain.accounts import AccountScope
from agent_fleet.errors import BudgetExhausted, Overloaded, ProviderError, ProviderUnreachable, QuotaExhausted

__all__ = [
    "FailedAttempt",
    "GiveUp",
    "GiveUpReason",
    "Retry",
    "RetryBudget",
    "RetryDecision",
    "RetryPolicy",
    "fallback_cause",
]


class GiveUpReason(StrEnum):
    QUOTA = "quota"  # the model is out of quota: no call goes there again
    SENT = "sent"  # timed out after sending: it may have been processed
    CLIENT_RETRIES = "client_retries"  # the client retries itself: sent once
    ATTEMPTS = "attempts"  # max_attempts reached
    NOT_RETRYABLE = "not_retryable"  # an answer another attempt cannot change
    RETRY_BUDGET = "retry_budget"  # the lane's retry budget is spent


@dataclass(frozen=True, slots=True)
class Retry:
    after: float  # seconds to wait before the next attempt
    requeue: bool = False  # wait off the line, then queue for a permit again
    draws_budget: bool = True


@dataclass(frozen=True, slots=True)
class GiveUp:
    reason: GiveUpReason
    fallback: str | None = None  # why another model may take the call, or None


RetryDecision = Retry | GiveUp


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """What one failed attempt was: its error, its number (from 1), what the provider's rate-limit
    headers said of its windows since it was sent (``"exhausted"``, ``"room"`` or None), and whether
    the gateway may retry it at all (False when the client retries itself)."""

    error: BaseException
    number: int
    window: str | None = None
    may_retry: bool = True


def fallback_cause(exc: BaseException) -> str | None:
    """Why a call may move to the next model, or None when it must not (the session pauses or fails)."""
    if isinstance(exc, QuotaExhausted):
        return "is out of quota"
    if isinstance(exc, BudgetExhausted):
        return "reached its model budget" if exc.scope == AccountScope.MODEL else None
    if isinstance(exc, Overloaded):
        return "kept failing (overloaded)"
    if isinstance(exc, ProviderUnreachable) and not getattr(exc, "sent", False):
        return "is unreachable"
    return None


def _retryable(error: BaseException) -> bool:
    if isinstance(error, ProviderUnreachable):
        return not getattr(error, "sent", False)  # nothing went out: sending again is safe
    return isinstance(error, ProviderError) and error.retryable


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 4  # first attempt included
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.5  # a delay is scaled by a factor drawn in [1 - jitter, 1]

    def backoff(self, attempt: int, error: BaseException, rand: float) -> float:
        """Seconds to wait after failed attempt ``attempt`` (from 1); ``rand`` in [0, 1) is the jitter."""
        backoff = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        backoff *= 1.0 - self.jitter * rand
        retry_after: float | None = getattr(error, "retry_after", None)
        if retry_after is not None:
            # The provider said how long: retrying earlier fails; never wait less.
            backoff = max(backoff, min(retry_after, 600.0))
        return backoff

    def decide(
        self, attempt: FailedAttempt, *, now: float, budget: RetryBudget, rand: Callable[[], float]
    ) -> RetryDecision:
        """What follows ``attempt`` (the rule is in the module docstring). Pure: ``budget`` is read,
        not changed (the caller withdraws for a :class:`Retry` that ``draws_budget``); ``rand`` is drawn
        once when the gateway may retry, so a seeded source gives the same delays every run."""
        error = attempt.error
        if isinstance(error, QuotaExhausted):
            return GiveUp(GiveUpReason.QUOTA, fallback_cause(error))
        if getattr(error, "sent", False):
            return GiveUp(GiveUpReason.SENT, fallback_cause(error))
        if not attempt.may_retry:
            return GiveUp(GiveUpReason.CLIENT_RETRIES, fallback_cause(error))
        jitter = rand()
        if attempt.number >= self.max_attempts:
            return GiveUp(GiveUpReason.ATTEMPTS, fallback_cause(error))
        if not _retryable(error):
            return GiveUp(GiveUpReason.NOT_RETRYABLE, fallback_cause(error))
        draws = attempt.window is None
        if draws and budget.balance_at(now) < 1.0:
            return GiveUp(GiveUpReason.RETRY_BUDGET, fallback_cause(error))
        return Retry(self.backoff(attempt.number, error, jitter), requeue=attempt.window == "room", draws_budget=draws)


@dataclass(slots=True)
class RetryBudget:
    ratio: float = 0.2
    min_per_s: float = 1.0
    max_balance: float = 100.0
    balance: float = 10.0  # the budget's configured starting size
    updated: float | None = None  # None until first used: a monotonic clock does not start at 0

    def balance_at(self, now: float) -> float:
        """The balance ``now``, refilled since the last change (the budget is not changed)."""
        if self.updated is None or now <= self.updated:
            return self.balance
        return min(self.max_balance, self.balance + (now - self.updated) * self.min_per_s)

    def _refill(self, now: float) -> None:
        self.balance = self.balance_at(now)
        if self.updated is None or now > self.updated:
            self.updated = now

    def on_request(self, now: float) -> None:
        self._refill(now)
        self.balance = min(self.max_balance, self.balance + self.ratio)

    def withdraw(self, now: float) -> None:
        """One retry is sent (its decision found room)."""
        self._refill(now)
        self.balance -= 1.0

    def try_retry(self, now: float) -> bool:
        self._refill(now)
        if self.balance >= 1.0:
            self.balance -= 1.0
            return True
        return False
