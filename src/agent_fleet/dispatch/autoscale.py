"""Autoscaling: the desired warm pool size from queue depth and latency, within limits.

Pure decision code; the caller starts or stops workers to reach :meth:`Autoscaler.desired`.

Rule (one decision per call)::

    demand = ceil((busy + queued) / target_load) + warm
    if latency_p95 > latency_slo:  demand = max(demand, current + step_up)
    demand = clamp(demand, min_workers, max_workers)

Growth is immediate. Shrinking waits until demand has stayed below ``current`` for
``down_cooldown`` seconds, then drops by at most ``step_down`` per decision: a brief lull does not
tear down workers the next burst needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent_fleet.clock import Clock

__all__ = ["AutoscaleConfig", "Autoscaler"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoscaleConfig:
    min_workers: int = 1
    max_workers: int = 64
    warm: int = 2  # idle workers kept ready above current demand
    target_load: int = 1  # sessions per worker the pool aims for
    latency_slo: float | None = None  # p95 seconds; above it the pool grows by step_up
    step_up: int = 4
    step_down: int = 4
    down_cooldown: float = 60.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_workers <= self.max_workers:
            raise ValueError("need 0 <= min_workers <= max_workers")
        if self.target_load < 1 or self.step_up < 1 or self.step_down < 1:
            raise ValueError("target_load, step_up and step_down must be at least 1")


class Autoscaler:
    def __init__(self, clock: Clock, config: AutoscaleConfig | None = None) -> None:
        self._clock = clock
        self.config = config or AutoscaleConfig()
        self._low_since: float | None = None

    def demand(self, *, current: int, busy: int, queued: int, latency_p95: float | None = None) -> int:
        c = self.config
        want = math.ceil((busy + queued) / c.target_load) + c.warm
        if c.latency_slo is not None and latency_p95 is not None and latency_p95 > c.latency_slo:
            want = max(want, current + c.step_up)
        return max(c.min_workers, min(c.max_workers, want))

    def desired(self, *, current: int, busy: int, queued: int, latency_p95: float | None = None) -> int:
        want = self.demand(current=current, busy=busy, queued=queued, latency_p95=latency_p95)
        now = self._clock.now()
        if want >= current:
            self._low_since = None
            return want
        if self._low_since is None:
            self._low_since = now
        if now - self._low_since < self.config.down_cooldown:
            return current
        self._low_since = now  # the next step down waits another cooldown
        return max(want, current - self.config.step_down)

    def __repr__(self) -> str:
        c = self.config
        return f"Autoscaler(min={c.min_workers}, max={c.max_workers}, warm={c.warm})"
