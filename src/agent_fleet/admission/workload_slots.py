"""Admission as the dispatcher's session slots: every agent session is a Workload.

Implements the dispatcher's ``SessionSlots`` port (the :mod:`agent_fleet.capacity` surface) over an
:class:`AdmissionController`: ``acquire`` submits the session's Workload and waits for Kueue's
decision; ``release`` frees its quota. A preempted session's Workload is already back in its queue
(as Kueue requeues an evicted Workload) and the dispatcher's preempt hook stops the running attempt.
The bound is Kueue's quotas, not a count: ``total`` is None; ``statistics()`` counts the admitted
sessions, reserved (admitted, no attempt yet) and in use apart.

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
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from agent_fleet.admission.controller import AdmissionController
from agent_fleet.admission.workload import Workload
from agent_fleet.capacity import CapacityFull, CapacityStatistics, Permit, statistics_of
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
        defaults: Mapping[str, Any] | None = None,
        drive: bool = True,
    ) -> None:
        self.controller = controller
        self.drive = drive  # False when several runs share one controller and its owner drives it
        self._queue = queue
        self._priority_class = priority_class
        self._priority = priority
        self._requests = dict(requests or {"pods": 1})
        self._defaults = dict(defaults or {})  # counted where the ClusterQueue covers them (Workload.defaults)
        self._created: dict[str, float] = {}  # first submission time per session
        self._submitted: set[str] = set()  # a Workload of this session is in the controller
        self._admitted: set[str] = set()  # ... and it holds quota
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._permits: dict[str, Permit] = {}  # the permit each session holds
        self._used: set[str] = set()  # ... on which an attempt runs
        self._serials = itertools.count(1)
        self._hook: Callable[[str, str, str | None], None] | None = None
        self._previous = (controller.on_admit, controller.on_preempt)
        controller.on_admit = self._on_admit
        controller.on_preempt = self._on_preempt

    def set_preempt_hook(self, hook: Callable[[str, str, str | None], None]) -> None:
        self._hook = hook

    @property
    def total(self) -> int | None:
        return None  # Kueue's quotas bound the sessions, not a count

    async def acquire(self, session_id: str) -> Permit:
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
        return self._grant(session_id)

    def acquire_nowait(self, session_id: str) -> Permit:
        """Admitted now (one settle of the controller decides), or :class:`CapacityFull` and the
        session's Workload is withdrawn."""
        if session_id not in self._submitted:
            self._submit(session_id)
            self.controller.settle()
        if session_id not in self._admitted:
            self._end(session_id)
            raise CapacityFull(f"session {session_id} is not admitted to {self._queue} now")
        return self._grant(session_id)

    def _grant(self, session_id: str) -> Permit:
        permit = self._permits[session_id] = Permit(session_id, next(self._serials))
        return permit

    def mark_used(self, permit: Permit) -> None:
        if self._permits.get(permit.holder) == permit:
            self._used.add(permit.holder)

    def release(self, permit: Permit) -> bool:
        if self._permits.get(permit.holder) != permit:
            return False
        del self._permits[permit.holder]
        self._end(permit.holder)
        return True

    def statistics(self) -> CapacityStatistics:
        used = len(self._used & self._admitted)
        waiting = sum(1 for f in self._waiting.values() if not f.done())
        held = dict.fromkeys(self._admitted, 1)
        return statistics_of(None, len(self._admitted) - used, used, waiting, held)

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
            defaults=self._defaults,
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
        self._used.discard(session_id)
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
        self._used.discard(workload.name)
        if self._hook is not None:
            # The event records Kueue's reason word alone (InCohortReclamation, ...).
            self._hook(workload.name, reason, by.name if by is not None else None)

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"<AdmissionSlots {self._queue!r} {s.borrowed_tokens} admitted ({s.reserved} reserved, "
            f"{s.in_use} in use), {s.tasks_waiting} waiting, {len(self._submitted)} submitted>"
        )
