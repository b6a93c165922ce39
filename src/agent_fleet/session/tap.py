"""A session log that tells a listener about every event it made durable.

Readers that want events as they happen (the streaming deduplicator, live figures) listen here
instead of polling the store; the listener runs after the write is acknowledged, so it never sees
an event the log could still lose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_fleet.domain.events import Event
from agent_fleet.session.port import ForwardingLog, SessionLog

__all__ = ["ForwardingLog", "TappedLog"]  # ForwardingLog is the port's; named here too

Listener = Callable[[Sequence[Event]], None]


class TappedLog(ForwardingLog):
    def __init__(self, inner: SessionLog, listener: Listener) -> None:
        super().__init__(inner)
        self._listener = listener

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        ev = await self.inner.emit_event(session_id, type, data)
        self._listener((ev,))
        return ev

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        out = await self.inner.emit_events(session_id, events)
        self._listener(out)
        return out
