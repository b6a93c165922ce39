"""The session-log port (SPEC.md, "Session log").

The log is the single source of truth of the engine: a harness keeps nothing it could
not rebuild from it. Implementations: :mod:`agent_fleet.session.sqlite` (embedded default)
and :mod:`agent_fleet.session.postgres`.

Guarantees every implementation gives (one test suite checks both):

* ``seq`` starts at 1 per session and has no gaps;
* ``emit_events`` is atomic: all of its events are stored, or none;
* when what ``emit_event``/``emit_events`` returned has been awaited, the events are durable: they
  survive ``kill -9`` of the process (group commit: many events share one fsync, none is acknowledged
  early);
* the projection (:class:`SessionRecord`) is updated in the same transaction as the events.

:class:`ForwardingLog` is the base of every wrapper around a log (an attempt's watched view, fault
injection, listeners): it forwards each call, and a wrapper overrides what it changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent_fleet.domain.events import Event, SessionRecord

__all__ = ["ForwardingLog", "SessionLog", "WakeState"]


@dataclass(frozen=True, slots=True)
class WakeState:
    """What a fresh harness needs to continue a session: its record and its whole history."""

    session: SessionRecord
    events: tuple[Event, ...]


class SessionLog(Protocol):
    async def open(self) -> None:
        """Connect and create the schema if needed. Raises StoreUnreachable."""

    async def close(self) -> None:
        """Flush pending writes and release resources. Safe to call twice."""

    def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Awaitable[Event]:
        """Append one event; awaiting the result gives it with its ``seq`` once it is durable.

        An ``async def`` implements this; so does a plain method that queues the append at once and
        returns a future (the stores do: no coroutine per append). Either way, callers ``await`` it.
        """

    def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> Awaitable[list[Event]]:
        """Append several events to one session atomically (awaited like :meth:`emit_event`)."""

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def get_events(self, session_id: str, after: int = 0) -> list[Event]:
        """Events with ``seq > after``, in order."""

    async def wake(self, session_id: str) -> WakeState:
        """Everything needed to rebuild the session. Raises SessionNotFound."""

    async def list_runs(self, limit: int = 100) -> list[SessionRecord]:
        """Run streams, newest first."""

    async def list_sessions(self, run_id: str) -> list[SessionRecord]:
        """Agent sessions of a run, in session-id order."""

    async def events_of_run(self, run_id: str, types: Sequence[str] | None = None) -> list[Event]:
        """Events of every agent session of a run (optionally only these types), by session then seq."""

    async def put_snapshot(self, key: str, data: Mapping[str, Any]) -> None:
        """Store a small JSON document under a key, replacing the previous one (e.g. admission state)."""

    async def get_snapshot(self, key: str) -> dict[str, Any] | None: ...


class ForwardingLog:
    """A session log that passes every call to ``inner``; wrappers override what they change."""

    def __init__(self, inner: SessionLog) -> None:
        self.inner = inner

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Awaitable[Event]:
        return self.inner.emit_event(session_id, type, data)

    def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> Awaitable[list[Event]]:
        return self.inner.emit_events(session_id, events)

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
