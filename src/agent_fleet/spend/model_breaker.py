"""A circuit breaker per (provider, model), rate-based over a sliding window, plus cooldowns.

* Closed: calls pass. When, over the last ``window_s``, at least ``min_calls`` finished and the share
  of failures (5xx/529, timeouts; a 429 means "slower", which the limiter handles) reached
  ``failure_rate``, it opens.
* Open: no call is sent until ``open_s`` has passed; then half-open.
* Half-open: ``probes`` calls go out; a success closes the breaker, a failure opens it again.
* Cooldowns: a ``retry-after`` from the provider pauses sending to this model until then. A later,
  shorter retry-after never shortens a running cooldown (``cooldown_until`` only moves forward).

Pure: every method takes ``now``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from agent_fleet.domain.breaker import BreakerState

__all__ = ["BreakerConfig", "BreakerState", "CircuitBreaker"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerConfig:
    window_s: float = 30.0
    min_calls: int = 20
    failure_rate: float = 0.5
    open_s: float = 15.0
    probes: int = 1


@dataclass(slots=True)
class CircuitBreaker:
    config: BreakerConfig = field(default_factory=BreakerConfig)
    state: BreakerState = BreakerState.CLOSED
    opened_at: float = 0.0
    cooldown_until: float = float("-inf")
    probes_out: int = 0
    _outcomes: deque[tuple[float, bool]] = field(default_factory=deque)
    _failures: int = 0

    def ready_in(self, now: float) -> float:
        """Seconds until a call may be sent (0 when it may go now)."""
        wait = self.cooldown_until - now
        if self.state is BreakerState.OPEN:
            wait = max(wait, self.opened_at + self.config.open_s - now)
            if wait <= 0:
                self.state = BreakerState.HALF_OPEN
                self.probes_out = 0
        if self.state is BreakerState.HALF_OPEN and wait <= 0 and self.probes_out >= self.config.probes:
            # Wait for the probe's verdict; poll again shortly.
            wait = max(wait, min(1.0, self.config.open_s))
        return max(0.0, wait)

    def on_send(self, now: float) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self.probes_out += 1

    def cool_down(self, now: float, seconds: float) -> None:
        self.cooldown_until = max(self.cooldown_until, now + seconds)

    def record(self, now: float, *, ok: bool) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self.probes_out = max(0, self.probes_out - 1)
            if ok:
                self.state = BreakerState.CLOSED
                self._outcomes.clear()
                self._failures = 0
            else:
                self._open(now)
            return
        self._outcomes.append((now, ok))
        if not ok:
            self._failures += 1
        horizon = now - self.config.window_s
        while self._outcomes and self._outcomes[0][0] < horizon:
            _, old_ok = self._outcomes.popleft()
            if not old_ok:
                self._failures -= 1
        n = len(self._outcomes)
        if (
            self.state is BreakerState.CLOSED
            and n >= self.config.min_calls
            and self._failures >= self.config.failure_rate * n
        ):
            self._open(now)

    def _open(self, now: float) -> None:
        self.state = BreakerState.OPEN
        self.opened_at = now
        self.probes_out = 0
        self._outcomes.clear()
        self._failures = 0

    def to_dict(self) -> dict[str, object]:
        return {"state": str(self.state), "cooldown_until": self.cooldown_until, "opened_at": self.opened_at}
