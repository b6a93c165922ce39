"""One guarded model call: the reservation, the permit, the attempts, and the settlement.

:class:`CallSlot` is an async context manager; the in-process ``Gateway.complete`` and the HTTP
gateway service (streaming included) both go through it::

    async with gateway.slot(session_id, model=..., prompt_tokens=..., max_tokens=...) as slot:
        answer = await slot.send(lambda: provider.complete(request))   # retries inside
        cost = slot.charge(answer.usage)

Entering reserves on every cap by the rule of :mod:`agent_fleet.spend.budget` (waiting while the
caps' room is held by calls in flight, or raising BudgetExhausted with nothing reserved) and takes a
concurrency permit. In strict budget mode ``slot.max_tokens`` may come back lower than asked: the
caller sends the call with that limit. Leaving always returns the permit and closes the reservation:

* ``charge`` was called: the real usage is what was charged;
* the request may have been processed but no usage came back (read timeout after sending, cancellation
  or client disconnect while on the wire or while a stream was flowing): the call's worst case (prompt
  estimate + ``max_tokens``, the same on every account, even where a cap left a short reservation), or
  what a cut stream had reported if that is more;
* otherwise (refused, answered with an error, cancelled while queueing): nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from types import TracebackType
from typing import Protocol, TypeVar

from agent_fleet.capacity import Permit
from agent_fleet.clock import Clock
from agent_fleet.domain.error_kinds import ADAPTIVE_KINDS, BREAKER_KINDS, error_kind
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ProviderError, ProviderTimeout, ProviderUnreachable, QuotaExhausted, RateLimited
from agent_fleet.spend.budget import Account, BudgetBook, Demand, Reservation
from agent_fleet.spend.meter import Meter
from agent_fleet.spend.patience import CallWatch
from agent_fleet.spend.prices import PriceTable
from agent_fleet.spend.retry import FailedAttempt, GiveUp, GiveUpReason, Retry, RetryPolicy
from agent_fleet.spend.traffic import Lane, Traffic

__all__ = ["CallSlot", "Lane", "SlotHost"]

T = TypeVar("T")
_ZERO = Decimal(0)


class SlotHost(Protocol):
    """What a :class:`CallSlot` uses of its gateway: the clock, prices, budgets, meter and traffic, the
    accounts a call is charged to, and the retry policy with its source of jitter."""

    @property
    def clock(self) -> Clock: ...
    @property
    def prices(self) -> PriceTable: ...
    @property
    def book(self) -> BudgetBook: ...
    @property
    def meter(self) -> Meter: ...
    @property
    def traffic(self) -> Traffic: ...
    @property
    def retry(self) -> RetryPolicy: ...
    @property
    def rand(self) -> Callable[[], float]: ...

    def accounts(self, session_id: str, model: str) -> tuple[Account, ...]: ...


class CallSlot:
    __slots__ = (
        "_host",
        "_permit",
        "answered_in",
        "charged",
        "cost",
        "lane",
        "last_input_tokens",
        "max_tokens",
        "model",
        "on_wire",
        "prompt_tokens",
        "provider_name",
        "received",
        "reservation",
        "retried",
        "session_id",
        "streaming",
        "worst_tokens",
        "worst_usd",
    )

    def __init__(
        self,
        host: SlotHost,
        lane: Lane,
        *,
        session_id: str,
        provider_name: str,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
    ) -> None:
        self._host = host
        self.lane = lane
        self.session_id = session_id
        self.provider_name = provider_name
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.worst_tokens = prompt_tokens + max_tokens
        self.worst_usd = host.prices.worst_case(model, prompt_tokens, max_tokens)
        self.reservation: Reservation | None = None
        self._permit: Permit | None = None
        self.received = Usage()  # what a stream reported before it was cut
        self.on_wire = False
        self.streaming = False
        self.charged = False
        self.cost = _ZERO
        self.last_input_tokens = 0
        self.retried: list[str] = []
        self.answered_in = 0.0  # seconds the answering attempt took (the model's pace)

    async def __aenter__(self) -> CallSlot:
        host = self._host
        if self.model in host.traffic.exhausted:
            raise QuotaExhausted(f"{self.model} is out of quota at {self.provider_name}; route elsewhere")
        prompt_usd = host.prices.worst_case(self.model, self.prompt_tokens, 0)
        demand = Demand(
            self.prompt_tokens,
            self.max_tokens,
            prompt_usd,
            host.prices.worst_case(self.model, self.prompt_tokens, 1) - prompt_usd,
        )
        self.reservation = await host.book.acquire(host.accounts(self.session_id, self.model), demand)
        if self.reservation.max_tokens != self.max_tokens:  # strict budgets: sent with what is left
            self.max_tokens = self.reservation.max_tokens
            self.worst_tokens = demand.worst_tokens - demand.max_tokens + self.max_tokens
            self.worst_usd = demand.usd(self.max_tokens)
        host.traffic.in_flight += 1
        try:
            host.traffic.tick(self.lane, host.clock.now())  # windows close lazily: judge the last one before queueing
            self._permit = await self.lane.limiter.acquire(self.session_id)
        except BaseException:
            host.traffic.in_flight -= 1
            host.book.settle(self.reservation, 0, _ZERO)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        host = self._host
        try:
            if self._permit is not None:
                permit, self._permit = self._permit, None
                self.lane.limiter.release(permit)
        finally:
            host.traffic.in_flight -= 1
            if not self.charged and self.reservation is not None:
                sent_timeout = isinstance(exc, ProviderUnreachable) and getattr(exc, "sent", False)
                if self.on_wire or self.streaming or sent_timeout:
                    # Fate unknown: the provider may have done (and billed) the work. Charge its worst case
                    # (prompt estimate + max_tokens), not a short reservation: the figures must cover the bill.
                    tokens, usd = self.worst_tokens, self.worst_usd
                    usage = Usage(min(tokens, self.prompt_tokens), max(0, tokens - self.prompt_tokens))
                    if self.received.total_tokens > tokens:
                        usage = self.received
                        tokens, usd = usage.total_tokens, max(usd, host.prices.cost(self.model, usage))
                    host.book.settle(self.reservation, tokens, usd)
                    host.meter.charge(self.session_id, self.model, usage, usd)
                    self.charged = True
                    if exc is not None:  # the caller records what was charged (a timed-out call: re-sent)
                        exc.charged = (usage, usd)  # type: ignore[attr-defined]
                else:
                    host.book.settle(self.reservation, 0, _ZERO)

    async def send(
        self,
        attempt_once: Callable[[], Awaitable[T]],
        *,
        retry: bool = True,
        patience: tuple[float, float, bool] | None = None,
    ) -> T:
        """Run ``attempt_once`` under the breaker, the rate buckets and the retry policy.

        Returns once the provider has answered successfully (for a stream: once its headers came);
        raises the last error when retrying stops. ``retry=False`` sends once (a client that retries
        itself gets the error, and its retry-after, at once). ``patience`` = (silence, whole, stream): each
        attempt runs under a :class:`~agent_fleet.spend.patience.CallWatch` on the gateway's clock and
        is a sent timeout once the server stays silent that long (progress keeps it going).
        """
        host = self._host
        clock = host.clock
        lane = self.lane
        breaker = host.traffic.breaker(self.provider_name, self.model)
        attempt = 0
        while True:
            attempt += 1
            while (wait := breaker.ready_in(clock.now())) > 0:
                await clock.sleep(wait)
            await self._take_rate()
            now = clock.now()
            if attempt == 1:
                lane.retry_budget.on_request(now)
            host.traffic.tick(lane, now)
            breaker.on_send(now)
            started = now
            if self._permit is not None:
                lane.limiter.mark_used(self._permit)  # reserved until now; marking again is a no-op
            self.on_wire = True
            try:
                if patience is None:
                    answer = await attempt_once()
                else:
                    answer = await self._watched(attempt_once, *patience)
            except (ProviderError, ProviderUnreachable) as exc:
                self.on_wire = False
                decision = self._failed(exc, attempt, started, retry=retry)
                if decision.requeue and self._permit is not None:
                    # A concurrency cap: wait off the line, then queue for a permit under the learned cap.
                    permit, self._permit = self._permit, None
                    lane.limiter.release(permit)
                    await clock.sleep(decision.after)
                    self._permit = await lane.limiter.acquire(self.session_id)
                else:
                    await clock.sleep(decision.after)
                continue
            self.on_wire = False
            now = clock.now()
            self.answered_in = now - started
            host.traffic.observe(lane, now, latency=now - started)
            breaker.record(now, ok=True)
            if lane.health is not None:
                lane.health.success(now)
            return answer

    async def _watched(
        self, attempt_once: Callable[[], Awaitable[T]], silence_s: float, whole_s: float, stream: bool
    ) -> T:
        """One attempt under a :class:`CallWatch`: silent past its limits, it is a sent timeout."""
        health = self.lane.health
        watch = CallWatch(
            self._host.clock,
            silence_s=silence_s,
            whole_s=whole_s,
            stream=stream,
            on_progress=health.progress if health is not None else None,
        )
        lane = self.lane
        lane.watches.add(watch)
        try:
            async with watch:
                answer = await attempt_once()
            lane.watches.discard(watch)
            for other in lane.watches:  # the server answered: the calls queued behind this one moved up
                other.queue_moved()
            return answer
        except TimeoutError:
            if not watch.expired:
                raise
            quiet = watch.first_s if watch.last_progress is None else watch.silence_s
            what = "no answer" if watch.last_progress is None else f"silent after {watch.progressed} chunks"
            err = ProviderTimeout(f"{self.provider_name} did not answer in time ({what} for {quiet:.0f} s)")
            err.sent = True  # type: ignore[attr-defined]  # it may have been processed: never sent twice
            raise err from None
        finally:
            lane.watches.discard(watch)

    def _failed(self, exc: ProviderError | ProviderUnreachable, attempt: int, started: float, *, retry: bool) -> Retry:
        """Count a failed attempt and take the policy's decision (:mod:`agent_fleet.spend.retry`):
        the :class:`Retry` to follow, or raise ``exc`` when it gives up."""
        host, lane = self._host, self.lane
        now = host.clock.now()
        kind = error_kind(exc)
        self._refund_rate(now)  # an answered error consumed no tokens
        host.meter.error(self.session_id, self.model, kind)
        if lane.health is not None:
            lane.health.failure(now, kind, exc)
            exc.outage = lane.health.in_outage(now)  # type: ignore[union-attr]
        window = (
            host.traffic.window_seen(self.provider_name, self.model, started) if isinstance(exc, RateLimited) else None
        )
        if window == "room":  # a 429 with room in every window: a concurrency cap
            host.traffic.learn_cap(lane, lane.limiter.statistics().in_use)
        elif kind in ADAPTIVE_KINDS:
            host.traffic.observe(lane, now, error=True)
        breaker = host.traffic.breaker(self.provider_name, self.model)
        if kind in BREAKER_KINDS:
            # A 429 says "slower", not "broken": the limiter and cooldowns answer it, not the breaker.
            breaker.record(now, ok=False)
        retry_after = getattr(exc, "retry_after", None)
        if window == "exhausted" and retry_after:
            # The whole window is used up: nobody may send to this model before retry-after.
            # Other 429s (a concurrency cap, say) hold back only this request's retry.
            breaker.cool_down(now, retry_after)
        exc.retried = tuple(self.retried)  # type: ignore[union-attr]  # what the events record
        exc.model = self.model  # type: ignore[union-attr]
        failed = FailedAttempt(exc, attempt, window=window, may_retry=retry)
        decision = host.retry.decide(failed, now=now, budget=lane.retry_budget, rand=host.rand)
        if isinstance(decision, GiveUp):
            if decision.reason is GiveUpReason.QUOTA:
                host.traffic.exhausted.add(self.model)
            raise exc
        if decision.draws_budget:
            lane.retry_budget.withdraw(now)
        self.retried.append(str(kind))
        return decision

    def held_usage(self) -> Usage:
        """The call's worst case as usage: what an answer whose usage never came is charged."""
        return Usage(self.prompt_tokens, max(0, self.worst_tokens - self.prompt_tokens))

    def charge(self, usage: Usage) -> Decimal:
        """Settle the reservation with the real usage at list price; returns the cost."""
        host = self._host
        cost = host.prices.cost(self.model, usage)
        if self.reservation is not None and not self.charged:
            host.book.settle(self.reservation, usage.total_tokens, cost)
            host.meter.charge(self.session_id, self.model, usage, cost)
            now = host.clock.now()
            if self.lane.tpm is not None:
                self.lane.tpm.charge(now, usage.total_tokens - self.worst_tokens)
            if self.lane.tokens_window is not None:
                self.lane.tokens_window.give_back(now, self.worst_tokens - usage.total_tokens)
        self.charged = True
        self.streaming = False
        self.cost = cost
        self.last_input_tokens = usage.input_tokens
        return cost

    async def _take_rate(self) -> None:
        """Reserve one request and the call's tokens (configured buckets, the provider's own windows);
        wait off any debt. Refunded if cancelled while waiting."""
        lane = self.lane
        if lane.rpm is None and lane.tpm is None and lane.requests_window is None and lane.tokens_window is None:
            return
        clock = self._host.clock
        now = clock.now()
        wait = 0.0
        for bucket, amount in ((lane.rpm, 1), (lane.tpm, self.worst_tokens)):
            if bucket is not None:
                wait = max(wait, bucket.reserve(now, amount))
        for window, amount in ((lane.requests_window, 1), (lane.tokens_window, self.worst_tokens)):
            if window is not None:
                wait = max(wait, window.reserve(now, amount))
        if wait <= 0:
            return
        try:
            await clock.sleep(wait)
        except BaseException:
            now = clock.now()
            if lane.rpm is not None:
                lane.rpm.charge(now, -1)
            if lane.requests_window is not None:
                lane.requests_window.give_back(now, 1)
            self._refund_rate(now)
            raise

    def _refund_rate(self, now: float) -> None:
        """Give the call's reserved tokens back (it was refused, or answered with an error)."""
        if self.lane.tpm is not None:
            self.lane.tpm.charge(now, -self.worst_tokens)
        if self.lane.tokens_window is not None:
            self.lane.tokens_window.give_back(now, self.worst_tokens)
