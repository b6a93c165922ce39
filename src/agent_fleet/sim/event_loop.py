"""An event loop whose timers fire within a fraction of a millisecond, for the simulated provider.

The simulated provider answers each call after the latency it drew; asyncio waits for its next
timer in ``epoll_wait``, which takes whole milliseconds and is rounded up (twice: by the selector,
then again by the float-to-millisecond conversion), so every simulated call took about 1.2 ms longer
than its configured latency. Waiting on the epoll descriptor with ``select`` first, whose timeout
has microsecond resolution, brings that to about 0.3 ms; the events themselves are still collected
by epoll, so the loop scales to any number of connections.
"""

from __future__ import annotations

import asyncio
import select
import selectors

__all__ = ["PreciseSelector", "precise_event_loop"]

_FD_SETSIZE = 1024  # select() cannot watch a descriptor at or above this number


class PreciseSelector(selectors.DefaultSelector):
    """The platform's selector (epoll on Linux) with microsecond-resolution timeouts."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        fileno = getattr(self, "fileno", None)  # epoll and kqueue are descriptors select() can wait on
        if timeout is not None and timeout > 0 and fileno is not None and fileno() < _FD_SETSIZE:
            select.select([fileno()], [], [], timeout)  # readable as soon as any registered event is
            timeout = 0
        return super().select(timeout)


def precise_event_loop() -> asyncio.AbstractEventLoop:
    return asyncio.SelectorEventLoop(PreciseSelector())
