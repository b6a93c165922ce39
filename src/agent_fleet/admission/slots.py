"""Admission as the dispatcher's session slots: every agent session is a Workload.

Implements the dispatcher's ``SessionSlots`` port over an :class:`AdmissionController`:
``acquire`` submits the session's Workload and waits for Kueue's decision; ``release`` frees its
quota. A preempted session is already back in its queue (as Kueue requeues an evicted
Workload): the dispatcher pauses it and calls ``acquire`` again, which waits for the readmission
instead of submitting a second Workload.
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
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._admitted: set[str] = set()  # admitted, not yet released
        self._requeued: set[str] = set()  # preempted and back in the queue
        self._hook: Callable[[str, str], None] | None = None
        self._previous = (controller.on_admit, controller.on_preempt)
        controller.on_admit = self._on_admit
        controller.on_preempt = self._on_preempt

    def set_preempt_hook(self, hook: Callable[[str, str], None]) -> None:
        self._hook = hook

    async def acquire(self, session_id: str) -> None:
        if session_id in self._admitted:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[session_id] = fut
        if session_id in self._requeued:
            self._requeued.discard(session_id)
        else:
            workload = Workload(
                name=session_id,
                queue=self._queue,
                requests=self._requests,
                priority=self._priority,
                priority_class=self._priority_class,
                created=self.controller.clock.now(),
                owner=session_id,
            )
            never = self.controller.submit(workload)
            if never is not None:
                self._waiting.pop(session_id, None)
                self.controller.finish(session_id)
                raise AdmissionRefused(f"session {session_id} can never be admitted to {self._queue}: {never}")
        try:
            await fut
        except asyncio.CancelledError:
            self._waiting.pop(session_id, None)
            self.controller.finish(session_id)
            raise

    def release(self, session_id: str) -> None:
        if session_id in self._requeued:
            return  # preempted: its Workload waits in the queue for readmission
        self._admitted.discard(session_id)
        self.controller.finish(session_id)

    def snapshot(self) -> dict[str, Any]:
        return self.controller.snapshot()

    async def run(self, stop: asyncio.Event) -> None:
        if self.drive:
            await self.controller.run(stop)

    def _owns(self, name: str) -> bool:
        return name in self._waiting or name in self._admitted or name in self._requeued

    def _on_admit(self, workload: Workload) -> None:
        if not self._owns(workload.name):
            if self._previous[0] is not None:
                self._previous[0](workload)
            return
        self._admitted.add(workload.name)
        fut = self._waiting.pop(workload.name, None)
        if fut is not None and not fut.done():
            fut.set_result(None)
        elif fut is None:
            # readmitted before the dispatcher came back for it
            self._requeued.discard(workload.name)

    def _on_preempt(self, workload: Workload, reason: str, by: Workload) -> None:
        if not self._owns(workload.name):
            if self._previous[1] is not None:
                self._previous[1](workload, reason, by)
            return
        self._admitted.discard(workload.name)
        self._requeued.add(workload.name)
        if self._hook is not None:
            self._hook(workload.name, f"{reason} by {by.name}")
