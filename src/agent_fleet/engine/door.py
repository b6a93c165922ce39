"""A run's session slots behind a door its coordinator shuts when the run is to stop."""

from __future__ import annotations

import asyncio

from agent_fleet.capacity import CapacityFull, CapacityStatistics, Permit
from agent_fleet.dispatch.slots import PreemptHook, SessionSlots

__all__ = ["RunDoor"]


class RunDoor:
    """The run's :class:`~agent_fleet.dispatch.slots.SessionSlots`, with a door.

    While the door is open it is the slots it wraps. Once :meth:`shut`, a session asking for a slot
    waits until it is cancelled (its log keeps it resumable), and one admitted in the same instant
    gives its slot straight back. ``idle`` is set while no slot is held, so a drain can wait for
    the sessions in flight to give theirs back; with the door shut it stays set once set.
    """

    def __init__(self, slots: SessionSlots) -> None:
        self.slots = slots
        self._held: dict[Permit, str] = {}
        self._shut = False
        self._never = asyncio.Event()  # never set: what a session waits on behind a shut door
        self.idle = asyncio.Event()
        self.idle.set()

    @property
    def is_shut(self) -> bool:
        return self._shut

    def shut(self) -> None:
        """No session is admitted from now on. Safe to call twice."""
        self._shut = True

    def holders(self) -> list[str]:
        """The sessions holding a slot, in the order they took it."""
        return list(dict.fromkeys(self._held.values()))

    # -- the slots' surface ---------------------------------------------------------------------
    @property
    def total(self) -> int | None:
        return self.slots.total

    async def acquire(self, holder: str) -> Permit:
        if self._shut:
            await self._never.wait()
        permit = await self.slots.acquire(holder)
        if self._shut:  # admitted as the door shut: the slot goes straight back
            self.slots.release(permit)
            await self._never.wait()
        return self._hold(permit, holder)

    def acquire_nowait(self, holder: str) -> Permit:
        if self._shut:
            raise CapacityFull("the run is stopping: no session is admitted any more")
        return self._hold(self.slots.acquire_nowait(holder), holder)

    def _hold(self, permit: Permit, holder: str) -> Permit:
        self._held[permit] = holder
        self.idle.clear()
        return permit

    def mark_used(self, permit: Permit) -> None:
        self.slots.mark_used(permit)

    def release(self, permit: Permit) -> bool:
        self._held.pop(permit, None)
        if not self._held:
            self.idle.set()
        return self.slots.release(permit)

    def statistics(self) -> CapacityStatistics:
        return self.slots.statistics()

    def set_preempt_hook(self, hook: PreemptHook) -> None:
        self.slots.set_preempt_hook(hook)

    async def run(self, stop: asyncio.Event) -> None:
        await self.slots.run(stop)

    def __repr__(self) -> str:
        return f"RunDoor({'shut' if self._shut else 'open'}, held={len(self._held)}, slots={self.slots!r})"
