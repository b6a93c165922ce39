"""Clocks: the only source of time for decision code.

Decision code never calls ``time`` or ``asyncio.sleep`` directly; it is handed a
:class:`Clock`. :class:`RealClock` reads the monotonic clock; :class:`VirtualClock`
only moves when told to, so timing logic is tested with exact values.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "VirtualClock"]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""

    async def sleep(self, seconds: float) -> None:
        """Wait until ``now()`` has advanced by ``seconds``."""


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "RealClock()"


class VirtualClock:
    """A clock that moves only on :meth:`advance` (or :meth:`run_until_idle`-style drivers).

    Sleepers are woken in deadline order; ties wake in the order they slept.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), fut))
        await fut

    def next_deadline(self) -> float | None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline has come."""
        self.set(self._now + seconds)

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError("a virtual clock never goes back")
        self._now = when
        while self._sleepers and self._sleepers[0][0] <= when:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def run_for(self, seconds: float) -> None:
        """Advance in steps to each pending deadline up to ``now + seconds``, yielding between."""
        end = self._now + seconds
        for _ in range(3):
            await asyncio.sleep(0)
        while True:
            nxt = self.next_deadline()
            if nxt is None or nxt > end:
                break
            self.set(nxt)
            for _ in range(3):
                await asyncio.sleep(0)
        self.set(end)
        for _ in range(3):
            await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now}, sleepers={len(self._sleepers)})"
