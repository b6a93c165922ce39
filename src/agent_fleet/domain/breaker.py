"""The state of a circuit breaker: the gateway's per (provider, model) breaker and dispatch's per-worker
breaker are the same three-state machine, so they share one vocabulary (the values show in statistics)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["BreakerState"]


class BreakerState(StrEnum):
    CLOSED = "closed"  # calls pass
    OPEN = "open"  # nothing is sent until the cool-off has passed
    HALF_OPEN = "half_open"  # probes go out; a success closes it, a failure opens it again
