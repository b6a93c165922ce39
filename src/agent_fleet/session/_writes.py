"""What both session-log backends share: the lifecycle, the write queue and the outcome of a batch.

Lifecycle. ``open`` once (``async with`` opens and closes); a closed store is not reopened.
``close`` hands the writer everything queued before it and returns once all of it is committed
and acknowledged.

Appends. ``emit_event`` and ``emit_events`` are plain methods: each checks and encodes its events,
queues the request and returns the future of its acknowledgement, which the caller awaits (no
coroutine or task per append; a bad append fails the future, as the coroutine's await did).

Group commit. Callers' appends collect in a list during one turn of the event loop; at the end
of the turn (a ``call_soon`` callback, so after every task that turn woke) the list goes to the
writer in one piece. The writer (a thread for SQLite, a task for PostgreSQL) drains what it has
been handed, commits it in one transaction and only then resolves each caller's future. Handing
over whole turns, not single appends, means the writer does not start a batch while the loop is
still busy appending to it: a thousand sessions acknowledged by one commit send their next events
together, and the writer takes them together, instead of taking the first few and making the rest
wait a whole commit. A future of another event loop (another thread) goes straight to the writer.

A batch whose commit fails because of one request's content (text that cannot be stored) is
committed again request by request, so the bad one fails alone (:meth:`QueuedWrites._singles`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Self

from agent_fleet.domain.events import Event
from agent_fleet.errors import StoreError
from agent_fleet.session._codec import (
    AppendRequest,
    Outcome,
    SnapshotRequest,
    check_append,
    encode_data,
    encode_items,
    run_of,
)
from agent_fleet.session.lease import attempt_fence

__all__ = ["Batch", "Lifecycle", "QueuedWrites"]

Batch = tuple[list[AppendRequest], list[SnapshotRequest]]


class Lifecycle(enum.Enum):
    NEW = "new"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class QueuedWrites(ABC):
    """``emit_event``/``emit_events``/``put_snapshot`` and the lifecycle, over a writer the subclass runs."""

    def __init__(self, max_batch_events: int) -> None:
        self._state = Lifecycle.NEW
        self._max_batch_events = max(1, max_batch_events)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[AppendRequest] = []  # appended during this turn of the loop
        self._pending_events = 0
        self._flush_due = False
        self._foreign_loops = False  # a future of another loop was ever queued
        # Handed to the writer: (requests, their event count) and snapshots.
        self._appends: collections.deque[tuple[list[AppendRequest], int]] = collections.deque()
        self._snapshots: collections.deque[SnapshotRequest] = collections.deque()
        self._fences: dict[str, int] = {}
        self._closing = False

    # -- lifecycle ------------------------------------------------------------------------------

    @abstractmethod
    async def _start(self) -> None:
        """Connect and start the writer; on failure leave the store as it should stay, and raise."""

    @abstractmethod
    async def _stop(self) -> None:
        """Wait for the writer to commit what it was handed and end, then release the connections."""

    @abstractmethod
    def _wake_writer(self) -> None: ...

    async def open(self) -> None:
        if self._state is Lifecycle.OPEN:
            return
        if self._state is not Lifecycle.NEW:
            raise StoreError("a closed session store cannot be reopened; create a new one")
        self._loop = asyncio.get_running_loop()
        await self._start()
        self._state = Lifecycle.OPEN

    async def close(self) -> None:
        if self._state is Lifecycle.NEW:
            self._state = Lifecycle.CLOSED
            return
        if self._state is Lifecycle.OPEN:
            self._state = Lifecycle.CLOSING
            await self._hand_over()
            self._closing = True
            self._wake_writer()
        # Every request queued before close() is committed and acknowledged before this returns.
        await self._stop()
        self._state = Lifecycle.CLOSED

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _ensure_open(self) -> None:
        if self._state is not Lifecycle.OPEN:
            raise StoreError(f"session store is {self._state.value}, not open")

    # -- appends --------------------------------------------------------------------------------

    def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> asyncio.Future[Event]:
        """Queues the append at once and returns the future of its acknowledgement (no task, no coroutine).

        What the caller sees is what an ``async def`` would give: the future is awaited where the
        coroutine was, and a bad append (or a store that is not open) fails the future, not the call.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Event] = loop.create_future()
        try:
            check_append(session_id, type)
            value, text = encode_data(data)
            if self._state is not Lifecycle.OPEN:
                self._ensure_open()
        except Exception as exc:
            future.set_exception(exc)
            return future
        fences = self._fences
        epoch = fences.get(run_of(session_id)) if fences else None
        self._submit(AppendRequest(session_id, ((type, value, text),), future, epoch, attempt_fence.get(), True), loop)
        return future

    def emit_events(
        self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> asyncio.Future[list[Event]]:
        """Like :meth:`emit_event`, for several events of one session, atomically."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Event]] = loop.create_future()
        try:
            check_append(session_id, "event")
            items = encode_items(session_id, events)
            if items and self._state is not Lifecycle.OPEN:
                self._ensure_open()
        except Exception as exc:
            future.set_exception(exc)
            return future
        if not items:
            future.set_result([])
            return future
        self._submit(AppendRequest(session_id, items, future, self._epoch_of(session_id), attempt_fence.get()), loop)
        return future

    def fence(self, run_id: str, epoch: int | None) -> None:
        """Every later append to the run's sessions carries ``epoch``; the writer checks it (lease.py)."""
        if epoch is None:
            self._fences.pop(run_id, None)
        else:
            self._fences[run_id] = epoch

    def _epoch_of(self, session_id: str) -> int | None:
        return self._fences.get(run_of(session_id)) if self._fences else None

    def _submit(self, request: AppendRequest, loop: asyncio.AbstractEventLoop) -> None:
        """Queues an append whose future belongs to ``loop`` (the running loop)."""
        if loop is self._loop:
            self._pending.append(request)
            self._pending_events += len(request.items)
            if not self._flush_due:
                self._flush_due = True
                loop.call_soon(self._flush)
        else:
            self._foreign_loops = True
            self._appends.append(([request], len(request.items)))
            self._wake_writer()

    def _flush(self) -> None:
        """Hands the writer what this turn of the loop appended (runs at the end of the turn)."""
        self._flush_due = False
        if self._pending:
            self._appends.append((self._pending, self._pending_events))
            self._pending, self._pending_events = [], 0
            self._wake_writer()

    async def _hand_over(self) -> None:
        """Hands the writer the appends of the current turn now, from whichever loop this runs on."""
        owner = self._loop
        if owner is None or owner is asyncio.get_running_loop() or not owner.is_running():
            self._flush()
            return
        handed: concurrent.futures.Future[None] = concurrent.futures.Future()

        def flush() -> None:
            self._flush()
            handed.set_result(None)

        owner.call_soon_threadsafe(flush)  # the owning loop's thread is the one that appends to the list
        await asyncio.wrap_future(handed)

    async def put_snapshot(self, key: str, data: Mapping[str, Any]) -> None:
        check_append(key, "snapshot")
        _, text = encode_data(data)
        loop = asyncio.get_running_loop()
        request = SnapshotRequest(key, text, loop.create_future())
        self._ensure_open()
        if loop is not self._loop:
            self._foreign_loops = True
        await self._hand_over()  # the appends asked for before it go to the writer first
        self._snapshots.append(request)
        self._wake_writer()
        await request.future

    # -- the writer's side ----------------------------------------------------------------------

    def _take_batch(self) -> Batch:
        """The writer's next batch: handed-over appends up to ``_max_batch_events`` events, every snapshot."""
        appends: list[AppendRequest] = []
        budget = self._max_batch_events
        queue = self._appends
        while queue and budget > 0:
            requests, count = queue.popleft()
            if count > budget:  # split the hand-over: the rest goes first next time
                taken = 0
                for cut, request in enumerate(requests):
                    if taken >= budget:
                        rest = requests[cut:]
                        queue.appendleft((rest, sum(len(r.items) for r in rest)))
                        requests, count = requests[:cut], taken
                        break
                    taken += len(request.items)
            appends += requests
            budget -= count
        snapshots: list[SnapshotRequest] = []
        while self._snapshots:
            snapshots.append(self._snapshots.popleft())
        return appends, snapshots

    def _idle(self) -> bool:
        """Whether the writer may end: closing, and nothing left to write."""
        return self._closing and not self._appends and not self._snapshots

    @staticmethod
    def _singles(appends: list[AppendRequest], snapshots: list[SnapshotRequest]) -> list[Batch]:
        """A batch split into one batch per request, to commit one by one after a request-specific failure."""
        return [([one], []) for one in appends] + [([], [one]) for one in snapshots]

    @staticmethod
    def _failed(batch: Batch, error: BaseException) -> list[Outcome]:
        return [(request.future, error) for requests in batch for request in requests]
