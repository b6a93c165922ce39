"""Admission as the dispatcher's session slots: every agent session is a Workload.

Implements the dispatcher's ``SessionSlots`` port over an :class:`AdmissionController`:
``acquire`` submits the session's Workload and waits for Kueue's decision; ``release`` frees its
quota. A preempted session's Workload is already back in its queue (as Kueue requeues an evicted
Workload) and the dispatcher's preempt hook stops the running attempt.

Invariants, whatever order preemption, readmission and the dispatcher's calls arrive in:

* ``acquire`` returns only while the session's Workload is admitted: a session admitted and then
  preempted before its coroutine resumed keeps waiting for the readmission;
* ``release`` always ends the Workload (its quota is freed, or it leaves its queue), so a session
  whose attempt finished in the same instant as its preemption never leaves a Workload behind;
* a session that comes back after ``release`` is resubmitted with its first creation time, so it
  keeps its place in the queue order (priority, then creation time), as an evicted Workload does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from agent_fleet.admission.controller import AdmissionController
from agent_fleet.admission.workload import Workload
from agent_fleet.errors import FleetError

__all__ = ["AdmissionRefused", "AdmissionSlots"]


class AdmissionRefused(FleetError):
    """A session's requests can never fit its queue (Kueue's ``ExceedsMaxQuota``)."""

    exit_code = 2


class AdmissionSlots:
    def __init__(
        self,
        controller: AdmissionController,
        *,
        queue: str = "default",
        priority_class: str | None = None,
        priority: int | None = None,
        requests: Mapping[str, Any] | None = None,
        drive: bool = True,
    ) -> None:
        self.controller = controller
        self.drive = drive  # False when several runs share one controller and its owner drives it
        self._queue = queue
        self._priority_class = priority_class
        self._priority = priority
        self._requests = dict(requests or {"pods": 1})
        self._created: dict[str, float] = {}  # first submission time per session
        self._submitted: set[str] = set()  # a Workload of this session is in the controller
        self._admitted: set[str] = set()  # ... and it holds quota
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._hook: Callable[[str, str, str | None], None] | None = None
        self._previous = (controller.on_admit, controller.on_preempt)
        controller.on_admit = self._on_admit
        controller.on_preempt = self._on_preempt

    def set_preempt_hook(self, hook: Callable[[str, str, str | None], None]) -> None:
        self._hook = hook

    async def acquire(self, session_id: str) -> None:
        if session_id not in self._submitted:
            self._submit(session_id)
        while session_id not in self._admitted:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[session_id] = fut
            try:
                await fut
            except asyncio.CancelledError:
                self._waiting.pop(session_id, None)
                self._end(session_id)
                raise

    def release(self, session_id: str) -> None:
        self._end(session_id)

    def snapshot(self) -> dict[str, Any]:
        return self.controller.snapshot()

    async def run(self, stop: asyncio.Event) -> None:
        if self.drive:
            await self.controller.run(stop)

    def _submit(self, session_id: str) -> None:
        created = self._created.setdefault(session_id, self.controller.clock.now())
        workload = Workload(
            name=session_id,
            queue=self._queue,
            requests=self._requests,
            priority=self._priority,
            priority_class=self._priority_class,
            created=created,
            owner=session_id,
        )
        never = self.controller.submit(workload)
        if never is not None:
            self.controller.finish(session_id)
            raise AdmissionRefused(f"session {session_id} can never be admitted to {self._queue}: {never}")
        self._submitted.add(session_id)

    def _end(self, session_id: str) -> None:
        self._admitted.discard(session_id)
        if session_id in self._submitted:
            self._submitted.discard(session_id)
            self.controller.finish(session_id)

    def _on_admit(self, workload: Workload) -> None:
        if workload.name not in self._submitted:
            if self._previous[0] is not None:
                self._previous[0](workload)
            return
        self._admitted.add(workload.name)
        fut = self._waiting.pop(workload.name, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_preempt(self, workload: Workload, reason: str, by: Workload) -> None:
        if workload.name not in self._submitted:
            if self._previous[1] is not None:
                self._previous[1](workload, reason, by)
            return
        self._admitted.discard(workload.name)
        if self._hook is not None:
            # The event records Kueue's reason word alone (InCohortReclamation, ...).
            self._hook(workload.name, reason, by.name if by is not None else None)

    def __repr__(self) -> str:
        return (
            f"AdmissionSlots(queue={self._queue!r}, admitted={len(self._admitted)}, "
            f"waiting={len(self._waiting)}, submitted={len(self._submitted)})"
        )
