"""A session log that tells a listener about every event it made durable.

Readers that want events as they happen (the streaming deduplicator, live figures) listen here
instead of polling the store; the listener runs after the write is acknowledged, so it never sees
an event the log could still lose.

Over a store that returns futures (:mod:`agent_fleet.session._writes`), an append here is a future
too, resolved by a callback on the store's: no coroutine or task per append. It behaves as the
coroutine did: a listener that raises fails the append, and a caller that stops waiting (its future
cancelled) is not heard, nor is its write waited for here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from agent_fleet.domain.events import Event
from agent_fleet.session.port import ForwardingLog, SessionLog

__all__ = ["ForwardingLog", "TappedLog"]  # ForwardingLog is the port's; named here too

Listener = Callable[[Sequence[Event]], None]


class TappedLog(ForwardingLog):
    def __init__(self, inner: SessionLog, listener: Listener) -> None:
        super().__init__(inner)
        self._listener = listener

    def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Awaitable[Event]:
        written = self.inner.emit_event(session_id, type, data)
        if isinstance(written, asyncio.Future):
            return self._relayed(written, True)
        return self._heard(written, True)

    def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> Awaitable[list[Event]]:
        written = self.inner.emit_events(session_id, events)
        if isinstance(written, asyncio.Future):
            return self._relayed(written, False)
        return self._heard(written, False)

    async def _heard(self, written: Awaitable[Any], single: bool) -> Any:
        out = await written
        self._listener((out,) if single else out)
        return out

    def _relayed(self, written: asyncio.Future[Any], single: bool) -> asyncio.Future[Any]:
        heard: asyncio.Future[Any] = written.get_loop().create_future()
        written.add_done_callback(partial(self._relay, heard, single))
        return heard

    def _relay(self, heard: asyncio.Future[Any], single: bool, written: asyncio.Future[Any]) -> None:
        if written.cancelled():
            heard.cancel()
            return
        error = written.exception()
        if heard.done():  # the caller stopped waiting: not heard, as a cancelled await was not
            return
        if error is not None:
            heard.set_exception(error)
            return
        out = written.result()
        try:
            self._listener((out,) if single else out)
        except Exception as exc:
            heard.set_exception(exc)
            return
        heard.set_result(out)
