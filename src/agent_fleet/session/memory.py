"""An in-memory session log that keeps the whole SessionLog contract (the suite every backend passes).

:class:`MemoryStore` is what a database file is to SQLite: several :class:`MemorySessionLog`
objects opened on one store share its sessions, sequences and snapshots, and what a closed log
wrote is there for the next one. Data is held as JSON text, as a database holds it, so readers and
writers never share a dict; the encoding, the projection rules and the batched wakes are the
backends' own (:mod:`agent_fleet.session._codec`, :mod:`agent_fleet.session._wakes`).

Nothing here waits on I/O: every call yields to the event loop once and completes, so tests on
:meth:`agent_fleet.clock.VirtualClock.auto_advance` get exact times.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.domain.events import Event, SessionRecord
from agent_fleet.errors import StoreError
from agent_fleet.session._codec import (
    AppendRequest,
    decode_data,
    encode_data,
    encode_items,
    fenced_runs,
    plan_appends,
    run_of,
    split_fenced,
)
from agent_fleet.session._wakes import WakeBatcher
from agent_fleet.session.lease import Lease, attempt_fence
from agent_fleet.session.port import WakeState

__all__ = ["MemorySessionLog", "MemoryStore"]


@dataclass(slots=True)
class _Stream:
    record: SessionRecord
    events: list[tuple[int, str, float, str]] = field(default_factory=list)  # seq, type, time, JSON


@dataclass(slots=True)
class MemoryStore:
    """The shared state of every log opened on it."""

    streams: dict[str, _Stream] = field(default_factory=dict)
    snapshots: dict[str, str] = field(default_factory=dict)
    leases: dict[str, Lease] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"MemoryStore(streams={len(self.streams)}, snapshots={len(self.snapshots)})"


class MemorySessionLog:
    """:class:`~agent_fleet.session.port.SessionLog` in this process's memory."""

    def __init__(self, store: MemoryStore | None = None, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.store = store if store is not None else MemoryStore()
        self._wall_clock = wall_clock  # event times are wall-clock seconds, as in every backend
        self._open = False
        self._closed = False
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._wakes = WakeBatcher(self._wake_many)
        self._fences: dict[str, int] = {}

    # -- lifecycle ------------------------------------------------------------------------------
    async def open(self) -> None:
        if self._closed:
            raise StoreError("the session log is closed")
        self._open = True

    async def close(self) -> None:
        """Every call accepted before close completes first. Safe to call twice."""
        self._closed = True
        while self._in_flight:
            self._drained.clear()
            await self._drained.wait()

    async def _enter(self) -> None:
        if self._closed or not self._open:
            raise StoreError("the session log is closed" if self._closed else "the session log is not open")
        self._in_flight += 1
        try:
            await asyncio.sleep(0)  # a store call always yields, as a real one does
        except BaseException:
            self._leave()
            raise

    def _leave(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._drained.set()

    # -- writes ---------------------------------------------------------------------------------
    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        return (await self.emit_events(session_id, [(type, data or {})]))[0]

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        items = encode_items(session_id, events)
        if not items:
            return []
        for type_, _, text in items:
            try:
                session_id.encode("utf-8"), type_.encode("utf-8"), text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise StoreError(f"the event cannot be stored: {exc.reason}") from None
        await self._enter()
        try:
            return self._append(session_id, items)
        finally:
            self._leave()

    def _append(self, session_id: str, items: list[tuple[str, dict[str, Any], str]]) -> list[Event]:
        loop = asyncio.get_running_loop()
        fence = self._fences.get(run_of(session_id))
        request = AppendRequest(session_id, items, loop.create_future(), fence, attempt_fence.get())
        leases = self.store.leases
        epochs = {key: leases[key].epoch for key in fenced_runs([request]) if key in leases}
        _, refused = split_fenced([request], epochs)
        if refused:
            raise refused[0][1]
        now = self._wall_clock()
        stream = self.store.streams.get(session_id)
        plan = plan_appends([request], {session_id: stream.record.last_seq} if stream is not None else {}, now)
        delta = plan.created.get(session_id)
        if stream is None:
            assert delta is not None
            record = SessionRecord(
                session_id, delta.kind, delta.run_id, delta.created_state, 0, now, now, {}
            )  # info is decoded from its text on every read
            stream = self.store.streams[session_id] = _Stream(record)
            stream.events.append((0, "", now, delta.first_text))  # seq 0 holds the creating event's data
        stream.events += [(seq, type_, at, text) for _, seq, type_, at, text in plan.rows]
        old = stream.record
        state = plan.moved.get(session_id, old.state)
        stream.record = SessionRecord(
            old.session_id, old.kind, old.run_id, state, plan.last[session_id], old.created_at, now, {}
        )
        events = plan.acks[0][1]
        assert isinstance(events, list)
        return events

    async def put_snapshot(self, key: str, data: Mapping[str, Any]) -> None:
        _, text = encode_data(data)
        await self._enter()
        try:
            self.store.snapshots[key] = text
        finally:
            self._leave()

    # -- leases (lease.py) -----------------------------------------------------------------------
    def fence(self, run_id: str, epoch: int | None) -> None:
        if epoch is None:
            self._fences.pop(run_id, None)
        else:
            self._fences[run_id] = epoch

    async def read_lease(self, run_id: str) -> Lease | None:
        await self._enter()
        try:
            return self.store.leases.get(run_id)
        finally:
            self._leave()

    async def swap_lease(self, lease: Lease, expected_epoch: int | None) -> bool:
        await self._enter()
        try:
            current = self.store.leases.get(lease.run_id)
            if (current.epoch if current is not None else None) != expected_epoch:
                return False
            self.store.leases[lease.run_id] = lease
            return True
        finally:
            self._leave()

    # -- reads ----------------------------------------------------------------------------------
    def _record(self, stream: _Stream) -> SessionRecord:
        r = stream.record
        info = decode_data(stream.events[0][3])
        return SessionRecord(r.session_id, r.kind, r.run_id, r.state, r.last_seq, r.created_at, r.updated_at, info)

    @staticmethod
    def _events(session_id: str, stream: _Stream, after: int = 0) -> list[Event]:
        return [Event(session_id, seq, t, at, decode_data(text)) for seq, t, at, text in stream.events[after + 1 :]]

    async def get_session(self, session_id: str) -> SessionRecord | None:
        await self._enter()
        try:
            stream = self.store.streams.get(session_id)
            return None if stream is None else self._record(stream)
        finally:
            self._leave()

    async def get_events(self, session_id: str, after: int = 0) -> list[Event]:
        await self._enter()
        try:
            stream = self.store.streams.get(session_id)
            return [] if stream is None else self._events(session_id, stream, max(0, after))
        finally:
            self._leave()

    async def wake(self, session_id: str) -> WakeState:
        return await self._wakes.wake(session_id)

    async def _wake_many(self, session_ids: Sequence[str]) -> dict[str, WakeState]:
        await self._enter()
        try:
            out = {}
            for sid in session_ids:
                stream = self.store.streams.get(sid)
                if stream is not None:
                    out[sid] = WakeState(self._record(stream), tuple(self._events(sid, stream)))
            return out
        finally:
            self._leave()

    async def list_runs(self, limit: int = 100) -> list[SessionRecord]:
        await self._enter()
        try:
            runs = [s for s in self.store.streams.values() if s.record.kind == "run"]
            runs.sort(key=lambda s: (s.record.created_at, s.record.session_id), reverse=True)
            return [self._record(s) for s in runs[:limit]]
        finally:
            self._leave()

    def _of_run(self, run_id: str) -> list[tuple[str, _Stream]]:
        return sorted((sid, s) for sid, s in self.store.streams.items() if s.record.run_id == run_id)

    async def list_sessions(self, run_id: str) -> list[SessionRecord]:
        await self._enter()
        try:
            return [self._record(s) for _, s in self._of_run(run_id)]
        finally:
            self._leave()

    async def events_of_run(self, run_id: str, types: Sequence[str] | None = None) -> list[Event]:
        await self._enter()
        try:
            wanted = None if types is None else set(types)
            return [
                e for sid, s in self._of_run(run_id) for e in self._events(sid, s) if wanted is None or e.type in wanted
            ]
        finally:
            self._leave()

    async def get_snapshot(self, key: str) -> dict[str, Any] | None:
        await self._enter()
        try:
            text = self.store.snapshots.get(key)
            return None if text is None else decode_data(text)
        finally:
            self._leave()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._open else "new"
        return f"MemorySessionLog({state}, streams={len(self.store.streams)})"
