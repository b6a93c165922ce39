"""Clocks: the only source of time for decision code.

Decision code never calls ``time`` or ``asyncio.sleep`` directly; it is handed a
:class:`Clock`. :class:`RealClock` reads the monotonic clock; :class:`VirtualClock`
only moves when told to (or, inside :meth:`VirtualClock.auto_advance`, whenever every task
waits), so timing logic is tested with exact values. :func:`timeout` bounds a block of code on
any clock, as ``asyncio.timeout`` does on the loop's.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ClockTimeout", "RealClock", "VirtualClock", "timeout"]


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


# Turns of the event loop in a row with nothing else ready before the loop counts as idle. CPython's
# loop keeps its runnable callbacks in ``_ready``; on a loop without it, two turns of the waiting
# task alone are taken as idle.
_QUIET_TURNS = 2


def _nothing_else_ready(loop: asyncio.AbstractEventLoop, idlers: int) -> bool:
    """Only the other tasks waiting for idleness (each one step away) are ready."""
    return len(getattr(loop, "_ready", ())) <= idlers - 1


class VirtualClock:
    """A clock that moves only on :meth:`advance`, :meth:`set` and :meth:`run_for`, or on its own
    inside :meth:`auto_advance`.

    Sleepers are woken in deadline order; ties wake in the order they slept.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()
        self._slept: asyncio.Event | None = None  # set on each new sleeper while auto-advancing
        self._idlers = 0  # tasks inside until_idle (they keep each other ready: not counted as work)

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), fut))
        if self._slept is not None:
            self._slept.set()
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

    @contextlib.asynccontextmanager
    async def auto_advance(self) -> AsyncIterator[VirtualClock]:
        """Inside, time moves on its own: whenever no task can run (every one waits, on this clock
        or on anything else), the clock jumps to the next deadline and wakes its sleepers.

        What "no task can run" means is read from the event loop's queue of ready callbacks, so a
        task waiting for real I/O (a thread, a socket) counts as waiting: use it with in-memory
        fakes (:mod:`agent_fleet.testing`), not with real backends, when exact times matter.
        """
        if self._slept is not None:
            raise RuntimeError("this clock is already advancing on its own")
        self._slept = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as tg:
                driver = tg.create_task(self._advance_when_idle())
                try:
                    yield self
                finally:
                    driver.cancel()
        finally:
            self._slept = None

    async def until_idle(self) -> None:
        """Return once no other task can run: each one waits (on this clock, an event, I/O).

        Outside :meth:`auto_advance` time does not move meanwhile: a test asserts the state the
        scenario has reached, then moves the clock. Several tasks may wait for idleness at once
        (``auto_advance`` is one of them); they do not count as work for each other.
        """
        loop = asyncio.get_running_loop()
        quiet = 0
        self._idlers += 1
        try:
            while quiet < _QUIET_TURNS:
                await asyncio.sleep(0)
                quiet = quiet + 1 if _nothing_else_ready(loop, self._idlers) else 0
        finally:
            self._idlers -= 1

    async def _advance_when_idle(self) -> None:
        slept = self._slept
        assert slept is not None
        while True:
            await self.until_idle()
            nxt = self.next_deadline()
            if nxt is None:
                slept.clear()
                await slept.wait()  # nothing sleeps on this clock: wait until something does
                continue
            self.set(nxt)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now}, sleepers={len(self._sleepers)})"


class ClockTimeout:
    """``async with timeout(clock, seconds)``: the block is cancelled once ``clock`` has moved
    ``seconds`` past entry, and :class:`TimeoutError` is raised in its place (as with
    ``asyncio.timeout``; a cancellation from elsewhere stays a cancellation). ``None``: no limit.

    The deadline is watched by a task of the block's own that sleeps on the clock; it is cancelled
    and awaited when the block ends, whichever way it ends.
    """

    def __init__(self, clock: Clock, seconds: float | None) -> None:
        self._clock = clock
        self._seconds = seconds
        self._task: asyncio.Task[object] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._cancelling = 0
        self.expired = False

    async def __aenter__(self) -> ClockTimeout:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("timeout() must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        if self._seconds is not None:
            self._watch = asyncio.get_running_loop().create_task(self._expire(task, self._seconds))
        return self

    async def _expire(self, task: asyncio.Task[object], seconds: float) -> None:
        await self._clock.sleep(seconds)
        self.expired = True
        task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        watch, task = self._watch, self._task
        if watch is None or task is None:
            return
        if not watch.done():  # it has not fired (firing is its last step): it never will now
            watch.cancel()
            await asyncio.wait([watch])
            return
        if self.expired and task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc


def timeout(clock: Clock, seconds: float | None) -> ClockTimeout:
    """Bound a block by ``seconds`` of ``clock`` (see :class:`ClockTimeout`)."""
    return ClockTimeout(clock, seconds)
