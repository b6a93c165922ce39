"""What one attempt does, as its worker's heartbeat reports it.

An attempt reaches the session log and the gateway through thin wrappers:

* :class:`WatchedLog` counts the attempt's writes (its progress) and lets every write it started
  land even when the attempt is cancelled: ``settle()`` waits for them, so a backup that wakes the
  session afterwards sees everything the stopped attempt recorded and never records it again. A
  write in flight counts as progress: a slow store slows every worker and is no worker's fault.
* :class:`WatchedGateway` marks the time spent inside a model call as progress (the gateway's own
  queueing, retries and timeouts bound it; waiting for a permit is not a hang), and forwards
  ``restore_spent`` once per session per dispatcher: the gateway of this process already counts
  what earlier attempts spent here, so seeding it again from the log would count that twice.
* :class:`WatchedHands` does the same for tool calls, which run under the hands' own timeouts
  (sandbox wall clock, MCP call timeout, fetch timeout).

Preemption stops an attempt at a turn boundary when a model call is in flight (``Progress.drain``):
the provider answers and bills that call whatever the client does, and a call cancelled here would
free its place under the gateway's concurrency cap while the provider still works on it. So the call
is answered, its answer is recorded, and then :class:`TurnBoundary` ends the attempt; the next
attempt goes on from the log. An attempt with no call in flight is cancelled at once.

A worker is hung when it is busy and its progress marker has not moved for ``hung_after``: its
attempt is neither writing to the log nor inside a model or tool call — stuck in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar

from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolSpec
from agent_fleet.domain.usage import Usage
from agent_fleet.hands.port import ChangeSource, Hands, Replays, ToolOutput
from agent_fleet.session.port import ForwardingLog, SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["Progress", "TurnBoundary", "WatchedGateway", "WatchedHands", "WatchedLog"]

T = TypeVar("T")


class TurnBoundary(Exception):
    """A draining attempt reached its turn boundary: the answer in flight at its preemption is recorded."""


class Progress:
    """Writes made and work in flight under its own timeout (model calls, CLI agent runs)."""

    __slots__ = ("calls", "drain", "waiting", "writes")

    def __init__(self) -> None:
        self.writes = 0
        self.waiting = 0
        self.calls = 0  # model calls in flight
        self.drain = False  # preempted during a call: stop once its answer is recorded

    @contextmanager
    def bounded_wait(self) -> Iterator[None]:
        """Time inside this block counts as progress: what runs here has its own timeout."""
        self.waiting += 1
        try:
            yield
        finally:
            self.waiting -= 1

    def marker(self, tick: int) -> tuple[int, int]:
        """Changes whenever a write landed, and on every tick while a bounded wait is in flight."""
        return (self.writes, tick if self.waiting else 0)

    def __repr__(self) -> str:
        return f"Progress(writes={self.writes}, waiting={self.waiting})"


class WatchedLog(ForwardingLog):
    """The session log as one attempt sees it."""

    def __init__(self, inner: SessionLog, progress: Progress) -> None:
        super().__init__(inner)
        self._progress = progress
        self._pending: set[asyncio.Future[Any]] = set()

    def _landed(self, landed: asyncio.Future[None], write: asyncio.Future[Any]) -> None:
        self._pending.discard(write)
        if not write.cancelled():
            write.exception()  # a failure the cancelled caller cannot take is the run's, not a stray
        if not landed.done():  # else the waiting attempt was cancelled: nobody to wake
            landed.set_result(None)

    async def _write(self, write: Awaitable[T]) -> T:
        # The attempt waits on a future of its own for the write (asyncio.shield's construction, with
        # one callback): cancelling the attempt must not leave a write whose landing nobody waits for.
        # A store's append is already a future, queued when it was asked for; any other awaitable runs
        # as a task of its own. Every model call makes three or four writes, so this path is kept to
        # one future and one callback.
        loop = asyncio.get_running_loop()
        pending = write if isinstance(write, asyncio.Future) else asyncio.ensure_future(write)  # a coroutine: a task
        self._pending.add(pending)
        landed: asyncio.Future[None] = loop.create_future()
        pending.add_done_callback(partial(self._landed, landed))
        progress = self._progress
        progress.waiting += 1  # a write in flight counts as progress (see Progress.bounded_wait)
        try:
            await landed
        finally:
            progress.waiting -= 1
        progress.writes += 1
        return pending.result()

    async def settle(self) -> None:
        """Wait until every write this attempt started has landed (or failed)."""
        while self._pending:
            await asyncio.wait(list(self._pending))

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        event = await self._write(self.inner.emit_event(session_id, type, data))
        self._boundary((type,))
        return event

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        written = await self._write(self.inner.emit_events(session_id, events))
        self._boundary(t for t, _ in events)
        return written

    def _boundary(self, types: Iterator[str] | tuple[str, ...]) -> None:
        if self._progress.drain and EventType.MODEL_RESPONSE in types:
            raise TurnBoundary("preempted: the answer in flight is recorded")

    async def close(self) -> None:
        return None  # the attempt does not own the store


class WatchedGateway:
    """The gateway as one attempt sees it."""

    def __init__(
        self,
        inner: ModelGateway,
        progress: Progress,
        restored: set[str],
        *,
        on_call: Callable[[], None] | None = None,
    ) -> None:
        self._inner = inner
        self._progress = progress
        self._restored = restored  # shared by every attempt of one dispatcher
        self._on_call = on_call  # told once, as the attempt's first model call begins

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        if self._progress.drain:  # before anything is sent: nothing of this call reaches the provider
            raise TurnBoundary("preempted before the next model call")
        if self._on_call is not None:
            on_call, self._on_call = self._on_call, None
            on_call()
        progress = self._progress
        progress.calls += 1
        progress.waiting += 1  # the gateway's own timeouts bound the call (see Progress.bounded_wait)
        try:
            return await self._inner.complete(session_id, request)
        finally:
            progress.waiting -= 1
            progress.calls -= 1

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        if session_id in self._restored:
            return
        self._restored.add(session_id)
        self._inner.restore_spent(session_id, usage, cost_usd)

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        return self._inner.unanswered_charge(request)


class WatchedHands:
    """A session's hands as one attempt sees them."""

    def __init__(self, inner: Hands, progress: Progress) -> None:
        self._inner = inner
        self._progress = progress

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._inner.specs()

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        with self._progress.bounded_wait():
            return await self._inner.execute(name, input)

    def replay(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        if isinstance(self._inner, Replays):
            self._inner.replay(calls)

    async def change(self) -> dict[str, Any] | None:
        inner = self._inner
        return await inner.change() if isinstance(inner, ChangeSource) else None

    async def aclose(self) -> None:
        await self._inner.aclose()
