"""Wakes read together: the sessions asked for in one turn of the event loop share one read.

A fleet wakes many sessions at once (a run's first sessions, a wave after a crash); reading each
on its own costs a read transaction per session. :class:`WakeBatcher` collects the wakes asked for
in the same turn, reads them with the backend's ``read_many`` (one snapshot for all), and starts
the next read, for what was asked meanwhile, when that one ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from agent_fleet.errors import SessionNotFound
from agent_fleet.session.port import WakeState

__all__ = ["WakeBatcher"]

ReadMany = Callable[[Sequence[str]], Awaitable[dict[str, WakeState]]]


class WakeBatcher:
    def __init__(self, read_many: ReadMany) -> None:
        self._read_many = read_many
        self._waiters: dict[str, list[asyncio.Future[WakeState | None]]] = {}
        self._reading = False
        self._reads: set[asyncio.Future[dict[str, WakeState]]] = set()  # kept alive while they run

    async def wake(self, session_id: str) -> WakeState:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[WakeState | None] = loop.create_future()
        self._waiters.setdefault(session_id, []).append(fut)
        if not self._reading:
            self._reading = True
            loop.call_soon(self._read)  # after this turn's callbacks: the wakes they ask for join
        state = await fut
        if state is None:
            raise SessionNotFound(f"no session {session_id!r} in the session store")
        return state

    def _read(self) -> None:
        batch, self._waiters = self._waiters, {}
        if not batch:
            self._reading = False
            return
        read = asyncio.ensure_future(self._read_many(list(batch)))
        self._reads.add(read)

        def answer(done: asyncio.Future[dict[str, WakeState]]) -> None:
            self._reads.discard(done)
            failure = None if done.cancelled() else done.exception()
            states = done.result() if failure is None and not done.cancelled() else {}
            for sid, waiters in batch.items():
                for waiter in waiters:
                    if waiter.done():
                        continue
                    if done.cancelled():
                        waiter.cancel()
                    elif failure is not None:
                        waiter.set_exception(_copy_error(failure))
                    else:
                        waiter.set_result(states.get(sid))
            self._read()  # what was asked for meanwhile, if anything

        read.add_done_callback(answer)


def _copy_error(exc: BaseException) -> BaseException:
    """One failure told to many waiters: each gets its own exception object."""
    try:
        return type(exc)(*exc.args)
    except Exception:
        return exc
