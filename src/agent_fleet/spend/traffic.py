"""The traffic state every call of a gateway shares: one lane per provider, breakers, used-up models.

A :class:`Lane` holds a provider's concurrency limit and its adaptive rule, its rate buckets, its retry
budget, the windows its rate-limit headers announce and its health. :class:`Traffic` owns the lanes and
what lies across them — a breaker per (provider, model), the models out of quota, the last rate-limit
headers per model, the calls in flight and the adaptive limit's verdicts — and is the one object a
:class:`~agent_fleet.spend.call.CallSlot` changes them through.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.clock import Clock
from agent_fleet.errors import ProviderDown
from agent_fleet.spend.limiter import (
    AdaptiveConcurrency,
    AdaptiveConfig,
    ConcurrencyLimiter,
    TokenBucket,
    WindowVerdict,
)
from agent_fleet.spend.model_breaker import BreakerConfig, CircuitBreaker
from agent_fleet.spend.pacing import HeaderWindow, learned_cap, window_state, windows_from
from agent_fleet.spend.patience import CallWatch
from agent_fleet.spend.port import ModelProvider
from agent_fleet.spend.provider_health import ProviderHealth
from agent_fleet.spend.retry import RetryBudget

__all__ = ["Lane", "Traffic"]


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
    watches: set[CallWatch] = field(default_factory=set)  # the watched calls waiting for an answer


def _named(provider: ModelProvider) -> str:
    host = getattr(provider, "host", "")
    return f"{provider.name} ({host})" if host and host not in provider.name else provider.name


class Traffic:
    """The lanes of one gateway and the state its calls share across them."""

    def __init__(
        self,
        clock: Clock,
        *,
        concurrency: int,
        adaptive: AdaptiveConfig | None,
        breaker: BreakerConfig,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        give_up_after_s: float,
    ) -> None:
        self.clock = clock
        self.concurrency = concurrency  # the baseline of every lane's limit
        self.adaptive = adaptive
        self.breaker_config = breaker
        self.give_up_after_s = give_up_after_s
        self.lanes: dict[str, Lane] = {}
        self.breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self.exhausted: set[str] = set()  # models out of quota: no call goes there again
        self.in_flight = 0
        self.verdicts: deque[tuple[str, WindowVerdict]] = deque(maxlen=256)
        self._rpm = requests_per_minute
        self._tpm = tokens_per_minute
        self._signals: dict[tuple[str, str], tuple[float, Any]] = {}  # last rate-limit headers per model

    def lane(self, provider: ModelProvider) -> Lane:
        """The provider's lane, made on first use (and its rate-limit headers wired to it)."""
        lane = self.lanes.get(provider.name)
        if lane is None:
            now = self.clock.now()
            cfg = self.adaptive
            lane = Lane(
                name=provider.name,
                limiter=ConcurrencyLimiter(self.concurrency),
                adaptive=AdaptiveConcurrency(cfg, start=now) if cfg is not None else None,
                rpm=TokenBucket.per_minute(self._rpm, now=now, burst_s=10.0) if self._rpm else None,
                tpm=TokenBucket.per_minute(self._tpm, now=now, burst_s=10.0) if self._tpm else None,
                health=ProviderHealth(_named(provider), self.give_up_after_s),
            )
            if cfg is not None:
                lane.limiter.total = min(self.concurrency, cfg.baseline)
            self.lanes[provider.name] = lane
            if hasattr(provider, "on_signals"):
                provider.on_signals = self._signal_sink(lane)
        return lane

    def _signal_sink(self, lane: Lane) -> Callable[[str, Any], None]:
        def sink(model: str, signals: Any) -> None:  # see spend.pacing for how the headers are read
            now = self.clock.now()
            self._signals[(lane.name, model)] = (now, signals)
            requests, tokens = windows_from(now, signals)
            lane.requests_window = requests or lane.requests_window
            lane.tokens_window = tokens or lane.tokens_window

        return sink

    def window_seen(self, provider: str, model: str, since: float) -> str | None:
        """What the provider's headers, since ``since`` (this attempt), said of its windows:
        ``"exhausted"``, ``"room"`` or None (no headers). See :func:`~agent_fleet.spend.pacing.window_state`."""
        seen = self._signals.get((provider, model))
        if seen is None or seen[0] < since:
            return None
        return window_state(seen[1])

    def learn_cap(self, lane: Lane, on_the_wire: int) -> None:
        """A 429 with room left in the provider's windows: a concurrency cap (spend.pacing)."""
        cap = learned_cap(on_the_wire)
        if lane.adaptive is not None:
            lane.adaptive.cap(cap)
            cap = lane.adaptive.limit
        if cap < lane.limiter.total:
            lane.limiter.total = cap

    def breaker(self, provider: str, model: str) -> CircuitBreaker:
        b = self.breakers.get((provider, model))
        if b is None:
            b = self.breakers[(provider, model)] = CircuitBreaker(self.breaker_config)
        return b

    def tick(self, lane: Lane, now: float) -> None:
        """Close the adaptive limit's windows that ended by ``now`` (they close lazily)."""
        if lane.adaptive is not None:
            self._apply(lane, lane.adaptive.tick(now))

    def observe(self, lane: Lane, now: float, *, latency: float | None = None, error: bool = False) -> None:
        """An answer (its latency) or an error the adaptive limit counts."""
        if lane.adaptive is not None:
            self._apply(lane, lane.adaptive.record(now, latency_s=latency, error=error))

    def _apply(self, lane: Lane, verdicts: list[WindowVerdict]) -> None:
        if not verdicts or lane.adaptive is None:
            return
        for v in verdicts:
            if v.after != v.before:
                self.verdicts.append((lane.name, v))
        if lane.limiter.total != lane.adaptive.limit:
            lane.limiter.total = lane.adaptive.limit

    def tick_all(self) -> None:
        now = self.clock.now()
        for lane in self.lanes.values():
            self.tick(lane, now)

    def provider_down(self) -> ProviderDown | None:
        """The first lane's verdict that the run must stop (:mod:`agent_fleet.spend.provider_health`), else None."""
        now = self.clock.now()
        for lane in self.lanes.values():
            verdict = lane.health.verdict(now) if lane.health is not None else None
            if verdict is not None:
                return verdict
        return None

    def set_concurrency(self, total: int) -> None:
        """Set the baseline (and current) concurrency of every lane, at run time."""
        self.concurrency = total
        for lane in self.lanes.values():
            if lane.adaptive is not None:
                lane.adaptive.set_baseline(total)
                lane.adaptive.limit = total
            lane.limiter.total = total
