"""Store faults: how long a backend keeps retrying a write (or a read) before the run stops.

A write that fails for a reason that may pass (a dropped connection, a server shutting down, a
full disk, a locked or read-only file) is retried on a fresh connection, with a doubling pause,
until ``deadline_s`` has passed since its first try; then it fails with
:class:`~agent_fleet.errors.StoreUnavailable` (exit 4, the run resumable). After one give-up the
store is *degraded*: later operations get one try each (a dead store does not cost a deadline per
write while the engine shuts down), until one succeeds.

The policy is pure bookkeeping on an injected monotonic clock; each backend sleeps its own way
(the SQLite writer is a thread, the PostgreSQL one a task).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.errors import StoreUnavailable

__all__ = ["DEFAULT_DEADLINE_S", "RetryPolicy", "Retrying"]

DEFAULT_DEADLINE_S = 30.0


@dataclass(slots=True)
class RetryPolicy:
    deadline_s: float = DEFAULT_DEADLINE_S
    first_pause_s: float = 0.05
    max_pause_s: float = 2.0
    now: Callable[[], float] = time.monotonic
    degraded: bool = field(default=False)

    def start(self, what: str) -> Retrying:
        return Retrying(self, what, self.now(), self.first_pause_s)

    def succeeded(self) -> None:
        self.degraded = False


@dataclass(slots=True)
class Retrying:
    """One operation's tries: :meth:`pause_after` says how long to wait, or raises at the deadline."""

    policy: RetryPolicy
    what: str
    started: float
    pause: float
    tries: int = 0

    def pause_after(self, reason: str) -> float:
        """The pause before the next try after a failure for ``reason``; StoreUnavailable once past the deadline."""
        self.tries += 1
        policy = self.policy
        waited = policy.now() - self.started
        if policy.degraded:  # it gave up on an earlier operation already
            raise StoreUnavailable(f"session store unavailable: {reason}; the run stopped and can be resumed")
        if waited + self.pause > policy.deadline_s:
            policy.degraded = True
            raise StoreUnavailable(
                f"session store unavailable for {waited:.1f} s ({self.tries} tries): {reason}; "
                "the run stopped and can be resumed"
            )
        pause = self.pause
        self.pause = min(self.pause * 2, policy.max_pause_s)
        return pause
