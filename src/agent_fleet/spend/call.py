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
  or client disconnect while on the wire or while a stream was flowing): the call's reservation (its
  smallest one, the same on every account), or what a cut stream had reported if that is more;
* otherwise (refused, answered with an error, cancelled while queueing): nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from agent_fleet.capacity import Permit
from agent_fleet.domain.errors import ADAPTIVE_KINDS, BREAKER_KINDS, error_kind
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ProviderError, ProviderUnreachable, QuotaExhausted, RateLimited
from agent_fleet.spend.budget import Demand, Reservation
from agent_fleet.spend.health import ProviderHealth
from agent_fleet.spend.limiter import AdaptiveConcurrency, ConcurrencyLimiter, TokenBucket
from agent_fleet.spend.pacing import HeaderWindow
from agent_fleet.spend.retry import RetryBudget

if TYPE_CHECKING:
    from agent_fleet.spend.gateway import Gateway

__all__ = ["CallSlot", "Lane"]

T = TypeVar("T")
_ZERO = Decimal(0)


@dataclass(slots=True)
class Lane:
    """Per provider: one concurrency limit and its adaptive rule, rate buckets, retry budget."""

    name: str
    limiter: ConcurrencyLimiter
    adaptive: AdaptiveConcurrency | None
    rpm: TokenBucket | None = None
    tpm: TokenBucket | None = None
    retry_budget: RetryBudget = field(default_factory=RetryBudget)
    requests_window: HeaderWindow | None = None  # the provider's own windows, from its headers
    tokens_window: HeaderWindow | None = None
    health: ProviderHealth | None = None


class CallSlot:
    __slots__ = (
        "_gw",
        "_permit",
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
        gateway: Gateway,
        lane: Lane,
        *,
        session_id: str,
        provider_name: str,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
    ) -> None:
        self._gw = gateway
        self.lane = lane
        self.session_id = session_id
        self.provider_name = provider_name
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.worst_tokens = prompt_tokens + max_tokens
        self.worst_usd = gateway.prices.worst_case(model, prompt_tokens, max_tokens)
        self.reservation: Reservation | None = None
        self._permit: Permit | None = None
        self.received = Usage()  # what a stream reported before it was cut
        self.on_wire = False
        self.streaming = False
        self.charged = False
        self.cost = _ZERO
        self.last_input_tokens = 0
        self.retried: list[str] = []

    async def __aenter__(self) -> CallSlot:
        gw = self._gw
        if self.model in gw._exhausted:
            raise QuotaExhausted(f"{self.model} is out of quota at {self.provider_name}; route elsewhere")
        prompt_usd = gw.prices.worst_case(self.model, self.prompt_tokens, 0)
        demand = Demand(
            self.prompt_tokens,
            self.max_tokens,
            prompt_usd,
            gw.prices.worst_case(self.model, self.prompt_tokens, 1) - prompt_usd,
        )
        self.reservation = await gw.book.acquire(gw._accounts(self.session_id, self.model), demand)
        if self.reservation.max_tokens != self.max_tokens:  # strict budgets: sent with what is left
            self.max_tokens = self.reservation.max_tokens
            self.worst_tokens = demand.worst_tokens - demand.max_tokens + self.max_tokens
            self.worst_usd = demand.usd(self.max_tokens)
        gw._in_flight += 1
        try:
            gw._tick(self.lane, gw.clock.now())  # windows close lazily: judge the last one before queueing
            self._permit = await self.lane.limiter.acquire(self.session_id)
        except BaseException:
            gw._in_flight -= 1
            gw.book.settle(self.reservation, 0, _ZERO)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        gw = self._gw
        try:
            if self._permit is not None:
                permit, self._permit = self._permit, None
                self.lane.limiter.release(permit)
        finally:
            gw._in_flight -= 1
            if not self.charged and self.reservation is not None:
                sent_timeout = isinstance(exc, ProviderUnreachable) and getattr(exc, "sent", False)
                if self.on_wire or self.streaming or sent_timeout:
                    # Fate unknown: the provider may have done (and billed) the work. Charge what was held.
                    tokens, usd = self.reservation.held()
                    usage = Usage(min(tokens, self.prompt_tokens), max(0, tokens - self.prompt_tokens))
                    if self.received.total_tokens > tokens:
                        usage = self.received
                        tokens, usd = usage.total_tokens, max(usd, gw.prices.cost(self.model, usage))
                    gw.book.settle(self.reservation, tokens, usd)
                    gw.meter.charge(self.session_id, self.model, usage, usd)
                    self.charged = True
                else:
                    gw.book.settle(self.reservation, 0, _ZERO)

    async def send(self, attempt_once: Callable[[], Awaitable[T]], *, retry: bool = True) -> T:
        """Run ``attempt_once`` under the breaker, the rate buckets and the retry policy.

        Returns once the provider has answered successfully (for a stream: once its headers came);
        raises the last error when retrying stops. ``retry=False`` sends once (a client that retries
        itself gets the error, and its retry-after, at once).
        """
        gw = self._gw
        clock = gw.clock
        lane = self.lane
        breaker = gw._breaker(self.provider_name, self.model)
        attempt = 0
        while True:
            attempt += 1
            while (wait := breaker.ready_in(clock.now())) > 0:
                await clock.sleep(wait)
            await self._take_rate()
            now = clock.now()
            if attempt == 1:
                lane.retry_budget.on_request(now)
            gw._tick(lane, now)
            breaker.on_send(now)
            started = now
            if self._permit is not None:
                lane.limiter.mark_used(self._permit)  # reserved until now; marking again is a no-op
            self.on_wire = True
            try:
                answer = await attempt_once()
            except (ProviderError, ProviderUnreachable) as exc:
                self.on_wire = False
                delay, requeue = self._failed(exc, attempt, started, retry=retry)
                if requeue and self._permit is not None:
                    # A concurrency cap: wait off the line, then queue for a permit under the learned cap.
                    permit, self._permit = self._permit, None
                    lane.limiter.release(permit)
                    await clock.sleep(delay)
                    self._permit = await lane.limiter.acquire(self.session_id)
                else:
                    await clock.sleep(delay)
                continue
            self.on_wire = False
            now = clock.now()
            gw._observe(lane, now, latency=now - started)
            breaker.record(now, ok=True)
            if lane.health is not None:
                lane.health.success(now)
            return answer

    def _failed(
        self, exc: ProviderError | ProviderUnreachable, attempt: int, started: float, *, retry: bool
    ) -> tuple[float, bool]:
        """Count and judge a failed attempt: (seconds to wait, whether to queue again for a permit)
        before the next one, or raise ``exc`` when there is none."""
        gw, lane = self._gw, self.lane
        now = gw.clock.now()
        kind = error_kind(exc)
        self._refund_rate(now)  # an answered error consumed no tokens
        gw.meter.error(self.session_id, self.model, kind)
        if lane.health is not None:
            lane.health.failure(now, kind, exc)
            exc.outage = lane.health.in_outage(now)  # type: ignore[union-attr]
        window = gw.window_seen(self.provider_name, self.model, started) if isinstance(exc, RateLimited) else None
        capped = window == "room"  # a 429 with room in every window: a concurrency cap
        if capped:
            gw.learn_cap(lane, now, lane.limiter.statistics().in_use)
        elif kind in ADAPTIVE_KINDS:
            gw._observe(lane, now, error=True)
        breaker = gw._breaker(self.provider_name, self.model)
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
        if isinstance(exc, QuotaExhausted):
            gw._exhausted.add(self.model)
            raise exc
        if getattr(exc, "sent", False):
            raise exc  # a timeout after sending: it may have been processed, do not send it twice
        delay = gw.retry.delay(attempt, exc, gw._rand()) if retry else None
        # A retry queued behind the learned cap, or behind a used-up window until its reset, adds no
        # load: it does not draw on the retry budget (which guards against retry storms).
        if delay is None or not (window is not None or lane.retry_budget.try_retry(now)):
            raise exc
        self.retried.append(str(kind))
        return delay, capped

    def charge(self, usage: Usage) -> Decimal:
        """Settle the reservation with the real usage at list price; returns the cost."""
        gw = self._gw
        cost = gw.prices.cost(self.model, usage)
        if self.reservation is not None and not self.charged:
            gw.book.settle(self.reservation, usage.total_tokens, cost)
            gw.meter.charge(self.session_id, self.model, usage, cost)
            now = gw.clock.now()
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
        clock = self._gw.clock
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
