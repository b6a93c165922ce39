"""How many sessions may be starting at once: from waking to their first model call.

A run admits its sessions at once, but the gateway serves only so many calls at a time; starting a
thousand sessions together makes every one of them take each step of its start (wake, record the
start, record the request) behind the other 999, so the first call leaves late and the gateway's
slots stand idle. Sessions pass the :class:`StartGate` a bounded number at a time, in the order
they reach it; each leaves it at its first model call (or when its attempt ends), so the sessions
that will fill the gateway's slots first are the ones that start first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["StartGate"]


class StartGate:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the start gate needs a limit of at least 1, got {limit}")
        self.limit = limit
        self._permits = asyncio.Semaphore(limit)
        self.starting = 0  # sessions between entering the gate and leaving it

    async def enter(self) -> Callable[[], None]:
        """Wait for a place; returns the idempotent ``leave`` that gives it back."""
        await self._permits.acquire()
        self.starting += 1
        left = False

        def leave() -> None:
            nonlocal left
            if not left:
                left = True
                self.starting -= 1
                self._permits.release()

        return leave

    def __repr__(self) -> str:
        return f"StartGate(limit={self.limit}, starting={self.starting})"
