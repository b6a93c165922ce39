"""A session log that tells a listener about every event it made durable.

Readers that want events as they happen (the streaming deduplicator, live figures) listen here
instead of polling the store; the listener runs after the write is acknowledged, so it never sees
an event the log could still lose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_fleet.domain.events import Event, SessionRecord
from agent_fleet.session.port import SessionLog, WakeState

__all__ = ["ForwardingLog", "TappedLog"]

Listener = Callable[[Sequence[Event]], None]


class ForwardingLog:
    """A session log that passes every call to ``inner``; wrappers override what they change."""

    def __init__(self, inner: SessionLog) -> None:
        self.inner = inner

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        return await self.inner.emit_event(session_id, type, data)

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        return await self.inner.emit_events(session_id, events)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        return await self.inner.get_session(session_id)

    async def get_events(self, session_id: str, after: int = 0) -> list[Event]:
        return await self.inner.get_events(session_id, after)

    async def wake(self, session_id: str) -> WakeState:
        return await self.inner.wake(session_id)

    async def list_runs(self, limit: int = 100) -> list[SessionRecord]:
        return await self.inner.list_runs(limit)

    async def list_sessions(self, run_id: str) -> list[SessionRecord]:
        return await self.inner.list_sessions(run_id)

    async def events_of_run(self, run_id: str, types: Sequence[str] | None = None) -> list[Event]:
        return await self.inner.events_of_run(run_id, types)

    async def put_snapshot(self, key: str, data: Mapping[str, Any]) -> None:
        await self.inner.put_snapshot(key, data)

    async def get_snapshot(self, key: str) -> dict[str, Any] | None:
        return await self.inner.get_snapshot(key)


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
