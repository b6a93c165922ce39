"""Session slots: what lets an admitted session run.

The dispatcher asks for a slot before each attempt and returns it after. The default,
:class:`LocalSlots`, is a plain counter of concurrently running sessions; the admission plane
provides an implementation with Kueue's semantics (queues, quotas, preemption).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

__all__ = ["LocalSlots", "PreemptHook", "SessionSlots"]

PreemptHook = Callable[[str, str, str | None], None]  # (session_id, reason, the preemptor or None)


class SessionSlots(Protocol):
    async def acquire(self, session_id: str) -> None:
        """Wait until the session is admitted."""

    def release(self, session_id: str) -> None:
        """The session stopped running (completed, paused, failed, or preempted)."""

    def set_preempt_hook(self, hook: PreemptHook) -> None:
        """Called when admission takes a running session's slot away."""


class LocalSlots:
    """At most ``total`` sessions run at once; FIFO, no preemption."""

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("total must be at least 1")
        self._sem = asyncio.Semaphore(total)
        self._total = total
        self._held: set[str] = set()

    async def acquire(self, session_id: str) -> None:
        await self._sem.acquire()
        self._held.add(session_id)

    def release(self, session_id: str) -> None:
        if session_id in self._held:
            self._held.discard(session_id)
            self._sem.release()

    def set_preempt_hook(self, hook: PreemptHook) -> None:
        return None

    def __repr__(self) -> str:
        return f"LocalSlots(total={self._total}, held={len(self._held)})"
