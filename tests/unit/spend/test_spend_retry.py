"""A failed attempt's fate is one pure value: exact decisions for each kind of failure."""

from __future__ import annotations

import pytest

from agent_fleet.errors import (
    BudgetExhausted,
    ClientRequestError,
    Overloaded,
    ProviderAuthError,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExhausted,
    RateLimited,
)
from agent_fleet.spend.retry import (
    FailedAttempt,
    GiveUp,
    GiveUpReason,
    Retry,
    RetryBudget,
    RetryDecision,
    RetryPolicy,
    fallback_cause,
)

POLICY = RetryPolicy(max_attempts=4, base_delay_s=0.5, max_delay_s=30.0, jitter=0.5)


def sent_timeout() -> ProviderTimeout:
    err = ProviderTimeout("no answer")
    err.sent = True  # type: ignore[attr-defined]
    return err


def decide(
    error: BaseException,
    number: int = 1,
    *,
    window: str | None = None,
    may_retry: bool = True,
    budget: RetryBudget | None = None,
    rand: float = 0.0,
    now: float = 100.0,
) -> RetryDecision:
    budget = budget if budget is not None else RetryBudget(balance=10.0, updated=now)
    return POLICY.decide(
        FailedAttempt(error, number, window=window, may_retry=may_retry), now=now, budget=budget, rand=lambda: rand
    )


@pytest.mark.parametrize(
    ("number", "rand", "after"),
    [(1, 0.0, 0.5), (2, 0.0, 1.0), (3, 0.0, 2.0), (1, 0.5, 0.375), (3, 1.0, 1.0)],
)
def test_overload_backs_off_exponentially_with_jitter(number: int, rand: float, after: float) -> None:
    assert decide(Overloaded("503", status=503), number, rand=rand) == Retry(after)


def test_the_last_attempt_gives_up_and_says_another_model_may_take_the_call() -> None:
    assert decide(Overloaded("503", status=503), 4) == GiveUp(GiveUpReason.ATTEMPTS, "kept failing (overloaded)")


def test_retry_after_is_never_undercut_and_is_capped_at_ten_minutes() -> None:
    assert decide(RateLimited("429", status=429, retry_after=7.0)) == Retry(7.0)
    assert decide(RateLimited("429", status=429, retry_after=0.1)) == Retry(0.5)
    assert decide(RateLimited("429", status=429, retry_after=3600.0)) == Retry(600.0)


def test_backoff_stops_growing_at_the_maximum_delay() -> None:
    policy = RetryPolicy(max_attempts=20)
    failed = FailedAttempt(Overloaded("503", status=503), 12)
    assert policy.decide(failed, now=0.0, budget=RetryBudget(), rand=lambda: 0.0) == Retry(30.0)


def test_a_429_with_room_in_the_windows_requeues_without_drawing_on_the_budget() -> None:
    empty = RetryBudget(balance=0.0, updated=100.0)
    err = RateLimited("429", status=429, retry_after=2.0)
    assert decide(err, window="room", budget=empty) == Retry(2.0, requeue=True, draws_budget=False)
    assert decide(err, window="exhausted", budget=empty) == Retry(2.0, requeue=False, draws_budget=False)
    assert decide(err, budget=empty) == GiveUp(GiveUpReason.RETRY_BUDGET, None)


def test_the_budget_is_read_at_the_clock_reading_and_left_unchanged() -> None:
    budget = RetryBudget(balance=0.5, min_per_s=1.0, updated=100.0)
    err = Overloaded("503", status=503)
    assert decide(err, budget=budget, now=100.4) == GiveUp(GiveUpReason.RETRY_BUDGET, "kept failing (overloaded)")
    assert decide(err, budget=budget, now=100.5) == Retry(0.5)
    assert (budget.balance, budget.updated) == (0.5, 100.0)
    budget.withdraw(100.5)
    assert (budget.balance, budget.updated) == (0.0, 100.5)


def test_what_is_never_sent_again() -> None:
    assert decide(QuotaExhausted("insufficient_quota", status=429)) == GiveUp(GiveUpReason.QUOTA, "is out of quota")
    assert decide(sent_timeout()) == GiveUp(GiveUpReason.SENT, None)
    assert decide(ClientRequestError("400", status=400)) == GiveUp(GiveUpReason.NOT_RETRYABLE, None)
    assert decide(ProviderAuthError("401", status=401)) == GiveUp(GiveUpReason.NOT_RETRYABLE, None)
    assert decide(Overloaded("503", status=503), may_retry=False) == GiveUp(
        GiveUpReason.CLIENT_RETRIES, "kept failing (overloaded)"
    )


def test_a_connection_failure_before_sending_is_retried() -> None:
    assert decide(ProviderUnreachable("refused"), 2) == Retry(1.0)
    assert decide(ProviderUnreachable("refused"), 4) == GiveUp(GiveUpReason.ATTEMPTS, "is unreachable")


def test_jitter_is_drawn_once_and_only_when_the_gateway_may_retry() -> None:
    draws: list[int] = []

    def rand() -> float:
        draws.append(1)
        return 0.0

    budget = RetryBudget()
    for error, may_retry in [
        (QuotaExhausted("q", status=429), True),
        (sent_timeout(), True),
        (Overloaded("503", status=503), False),
    ]:
        POLICY.decide(FailedAttempt(error, 1, may_retry=may_retry), now=0.0, budget=budget, rand=rand)
    assert draws == []
    POLICY.decide(FailedAttempt(ClientRequestError("400", status=400), 1), now=0.0, budget=budget, rand=rand)
    POLICY.decide(FailedAttempt(Overloaded("503", status=503), 4), now=0.0, budget=budget, rand=rand)
    assert draws == [1, 1]


def test_fallback_cause_covers_budgets_too() -> None:
    assert fallback_cause(BudgetExhausted("model cap", scope="model")) == "reached its model budget"
    assert fallback_cause(BudgetExhausted("session cap", scope="session")) is None
