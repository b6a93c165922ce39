"""Session slots: what lets an admitted session run.

The dispatcher takes a slot before a session's attempts and gives it back after; a slot is a
:class:`~agent_fleet.capacity.Capacity` permit held on behalf of the session id, reserved when
admitted and marked used once an attempt runs. The default, :class:`LocalSlots`, counts sessions
running at once; the admission plane provides an implementation with Kueue's semantics (queues,
quotas, preemption), whose decisions are driven by :meth:`SessionSlots.run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from agent_fleet.capacity import Capacity, CapacityLimiter, Permit

__all__ = ["LocalSlots", "PreemptHook", "SessionSlots"]

PreemptHook = Callable[[str, str, str | None], None]  # (session_id, reason, the preemptor or None)


class SessionSlots(Capacity[Permit], Protocol):
    """``acquire(session_id)`` waits until the session is admitted; ``release`` is called when it
    stopped running (completed, paused, failed, or preempted)."""

    def set_preempt_hook(self, hook: PreemptHook) -> None:
        """Called when admission takes a running session's slot away."""

    async def run(self, stop: asyncio.Event) -> None:
        """Make the slots' decisions until ``stop`` is set (returns at once if nothing decides)."""


class LocalSlots(CapacityLimiter):
    """At most ``total`` sessions run at once; FIFO, no preemption."""

    def __init__(self, total: int) -> None:
        super().__init__(total, name="session slots")

    def set_preempt_hook(self, hook: PreemptHook) -> None:
        return None

    async def run(self, stop: asyncio.Event) -> None:
        return None
