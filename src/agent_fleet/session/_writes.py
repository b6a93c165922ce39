"""The write side both session-log backends share: callers queue appends and snapshots, a writer
commits them in batches (group commit) and resolves each caller's future once it is durable.
Also the lifecycle both share: ``async with`` opens and closes; a closed store is not reopened."""

from __future__ import annotations

import asyncio
import collections
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Self

from agent_fleet.domain.events import Event
from agent_fleet.session._codec import AppendRequest, SnapshotRequest, check_append, encode_data, run_of
from agent_fleet.session.lease import attempt_fence

__all__ = ["QueuedWrites"]


class QueuedWrites(ABC):
    """``emit_event``/``emit_events``/``put_snapshot`` over a writer the subclass runs."""

    _appends: collections.deque[AppendRequest]
    _snapshots: collections.deque[SnapshotRequest]
    _max_batch_events: int
    _fences: dict[str, int]

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @abstractmethod
    def _ensure_open(self) -> None: ...

    @abstractmethod
    def _submit(self, request: AppendRequest) -> asyncio.Future[list[Event]]: ...

    @abstractmethod
    def _wake_writer(self) -> None: ...

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        check_append(session_id, type)
        value, text = encode_data(data)
        request = AppendRequest(
            session_id, ((type, value, text),), self._new_future(), self._epoch_of(session_id), attempt_fence.get()
        )
        events = await self._submit(request)
        return events[0]

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        check_append(session_id, "event")
        items = []
        for type_, data in events:
            check_append(session_id, type_)
            value, text = encode_data(data)
            items.append((type_, value, text))
        if not items:
            return []
        request = AppendRequest(session_id, items, self._new_future(), self._epoch_of(session_id), attempt_fence.get())
        return await self._submit(request)

    def fence(self, run_id: str, epoch: int | None) -> None:
        """Every later append to the run's sessions carries ``epoch``; the writer checks it (lease.py)."""
        if epoch is None:
            self._fences.pop(run_id, None)
        else:
            self._fences[run_id] = epoch

    def _epoch_of(self, session_id: str) -> int | None:
        return self._fences.get(run_of(session_id)) if self._fences else None

    async def put_snapshot(self, key: str, data: Mapping[str, Any]) -> None:
        check_append(key, "snapshot")
        _, text = encode_data(data)
        request = SnapshotRequest(key, text, self._new_future())
        self._ensure_open()
        self._snapshots.append(request)
        self._wake_writer()
        await request.future

    def _take_batch(self) -> tuple[list[AppendRequest], list[SnapshotRequest]]:
        """The writer's next batch: queued appends up to ``_max_batch_events`` events, every snapshot."""
        appends: list[AppendRequest] = []
        budget = self._max_batch_events
        queue = self._appends
        while queue and budget > 0:
            request = queue.popleft()
            appends.append(request)
            budget -= len(request.items)
        snapshots: list[SnapshotRequest] = []
        while self._snapshots:
            snapshots.append(self._snapshots.popleft())
        return appends, snapshots

    def _new_future(self) -> asyncio.Future[list[Event]]:
        return asyncio.get_running_loop().create_future()
