"""Wakes read together: the sessions asked for in one turn of the event loop share one read.

A fleet wakes many sessions at once (a run's first sessions, a wave after a crash); reading each
on its own costs a read transaction per session. :class:`WakeBatcher` collects the wakes asked for
in the same turn, reads them with the backend's ``read_many`` (one snapshot for all), and starts
the next read, for what was asked meanwhile, when that one ends.

No task of its own runs a read: the first caller of a batch leads it, reading inside its own
``wake`` for everyone in the batch, so every read has an owner that awaits it and nothing outlives
the callers. Leadership passes on when a read ends. A leader that is cancelled hands the batch,
unanswered, to the next waiter; a waiter cancelled meanwhile simply leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from agent_fleet.errors import SessionNotFound
from agent_fleet.session.port import WakeState

__all__ = ["WakeBatcher"]

ReadMany = Callable[[Sequence[str]], Awaitable[dict[str, WakeState]]]


class _Lead:
    """Told to a waiter instead of an answer: read the batch now waiting."""


_LEAD: Final = _Lead()
_Answer = WakeState | None | _Lead


class WakeBatcher:
    def __init__(self, read_many: ReadMany) -> None:
        self._read_many = read_many
        self._asked: dict[str, list[asyncio.Future[_Answer]]] = {}  # for the next read
        self._leading = False  # a leader is collecting or reading

    async def wake(self, session_id: str) -> WakeState:
        fut: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        self._asked.setdefault(session_id, []).append(fut)
        if not self._leading:
            self._leading = True
            fut.set_result(_LEAD)
        try:
            answer = await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.result() is _LEAD:
                self._pass_on()  # chosen to lead as it was cancelled
            raise
        if isinstance(answer, _Lead):
            answer = await self._lead(session_id, fut)
        if answer is None:
            raise SessionNotFound(f"no session {session_id!r} in the session store")
        return answer

    async def _lead(self, session_id: str, mine: asyncio.Future[_Answer]) -> WakeState | None:
        try:
            await asyncio.sleep(0)  # this turn's other wakes join the batch
        except asyncio.CancelledError:
            self._pass_on()
            raise
        batch, self._asked = self._asked, {}
        try:
            states = await self._read_many(list(batch))
        except asyncio.CancelledError:
            self._requeue(batch)  # nobody was answered: the next leader reads them again
            self._pass_on()
            raise
        except BaseException as exc:
            self._tell(batch, mine, failure=exc)
            self._pass_on()
            raise
        self._tell(batch, mine, states=states)
        self._pass_on()
        return states.get(session_id)

    def _tell(
        self,
        batch: dict[str, list[asyncio.Future[_Answer]]],
        mine: asyncio.Future[_Answer],
        *,
        states: dict[str, WakeState] | None = None,
        failure: BaseException | None = None,
    ) -> None:
        for sid, waiters in batch.items():
            for waiter in waiters:
                if waiter is mine or waiter.done():
                    continue
                if failure is not None:
                    waiter.set_exception(_copy_error(failure))
                else:
                    waiter.set_result((states or {}).get(sid))

    def _requeue(self, batch: dict[str, list[asyncio.Future[_Answer]]]) -> None:
        for sid, waiters in batch.items():
            live = [w for w in waiters if not w.done()]
            if live:
                self._asked.setdefault(sid, []).extend(live)

    def _pass_on(self) -> None:
        """The next waiter still waiting leads the next read; with none, the next caller will."""
        for waiters in self._asked.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(_LEAD)
                    return
        self._leading = False

    def __repr__(self) -> str:
        waiting = sum(1 for ws in self._asked.values() for w in ws if not w.done())
        return f"WakeBatcher(leading={self._leading}, waiting={waiting})"


def _copy_error(exc: BaseException) -> BaseException:
    """One failure told to many waiters: each gets its own exception object."""
    try:
        return type(exc)(*exc.args)
    except Exception:
        return exc
