"""The capacity port: one surface for everything that bounds how much runs at once.

Five primitives share it: the gateway's concurrency limiter (``spend.limiter``), local session
slots (``dispatch.slots``), the start gate (``dispatch.starts``), the worker pool
(``dispatch.pool``) and admission slots (``admission.slots``). The surface is trio's
``CapacityLimiter`` with Temporal's slot lifecycle:

* ``acquire(holder)`` waits for capacity and *reserves* it on behalf of ``holder`` (a session id);
  ``acquire_nowait(holder)`` reserves at once or raises :class:`CapacityFull`. Both return the
  primitive's permit (a :class:`Permit`; the worker pool's is its ``Lease``).
* ``mark_used(permit)``: the reserved capacity now does its work (a call goes on the wire, an
  attempt starts). Marking twice is marking once.
* ``release(permit)`` gives it back, used or not; ``False`` when it was no longer held (released
  before, or taken back). Waiters are served first come, first served.
* ``total`` is what may be held at once; ``statistics()`` is a frozen :class:`CapacityStatistics`
  counting reserved and in-use apart; ``repr()`` shows the counts.

:class:`CapacityLimiter` is the counting implementation (the limiter, local slots and the start
gate are one); its ``total`` can be changed at run time and raising it wakes waiters at once.
The pool and admission keep their own rules for *whether* capacity is free (worker health and
selection; Kueue quotas) behind the same surface. Like :mod:`agent_fleet.clock`, this module is
shared by every plane and imports nothing of theirs.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, TypeVar

from agent_fleet.errors import FleetError

__all__ = ["Capacity", "CapacityFull", "CapacityLimiter", "CapacityStatistics", "Permit", "statistics_of"]

P = TypeVar("P")


class CapacityFull(FleetError):
    """``acquire_nowait`` found nothing free (or others already wait for it)."""


class Permit:
    """Capacity reserved on behalf of ``holder``. Each permit is its own object: equal only to
    itself (hashing by identity keeps every operation on it cheap); ``serial`` numbers them."""

    __slots__ = ("holder", "serial")

    def __init__(self, holder: str, serial: int) -> None:
        self.holder = holder
        self.serial = serial

    def __repr__(self) -> str:
        return f"Permit(holder={self.holder!r}, serial={self.serial})"


@dataclass(frozen=True, slots=True)
class CapacityStatistics:
    """What a capacity primitive holds right now (trio's figures plus Temporal's split)."""

    total_tokens: int | None  # None where the bound is not a count (admission: Kueue quotas)
    reserved: int  # acquired, not yet marked used
    in_use: int  # marked used
    tasks_waiting: int
    borrowers: Mapping[str, int]  # holder -> permits held (reserved and in use)

    @property
    def borrowed_tokens(self) -> int:
        return self.reserved + self.in_use

    @property
    def available_tokens(self) -> int | None:
        return None if self.total_tokens is None else max(0, self.total_tokens - self.borrowed_tokens)


def statistics_of(
    total: int | None, reserved: int, in_use: int, waiting: int, borrowers: Mapping[str, int]
) -> CapacityStatistics:
    """A frozen record over a copy of ``borrowers``."""
    return CapacityStatistics(total, reserved, in_use, waiting, MappingProxyType(dict(borrowers)))


class Capacity(Protocol[P]):
    """The surface every capacity primitive offers (module docstring)."""

    @property
    def total(self) -> int | None: ...

    async def acquire(self, holder: str) -> P: ...

    def acquire_nowait(self, holder: str) -> P: ...

    def mark_used(self, permit: P) -> None: ...

    def release(self, permit: P) -> bool: ...

    def statistics(self) -> CapacityStatistics: ...


class CapacityLimiter:
    """At most ``total`` permits out at once, handed out in FIFO order.

    Acquisition is one synchronous check-and-take and a released permit goes straight to the
    oldest waiter, so the limiter never has more than ``total`` out and no newcomer barges past a
    waiter. A holder may have several permits (a session with parallel calls). Lowering ``total``
    never revokes a permit; it only stops new ones until enough are released.
    """

    def __init__(self, total: int, *, name: str = "capacity") -> None:
        self._name = name
        self._total = self._check(total)
        self._held: dict[Permit, bool] = {}  # permit -> marked used
        self._in_use = 0
        self._borrowers: dict[str, int] = {}
        self._waiters: deque[tuple[asyncio.Future[Permit], str]] = deque()
        self._serials = itertools.count(1)

    def _check(self, total: int) -> int:
        if not isinstance(total, int) or isinstance(total, bool) or total < 1:
            raise ValueError(f"the {self._name} total is a whole number ≥ 1, not {total!r}")
        return total

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = self._check(value)
        self._wake()

    @property
    def borrowed_tokens(self) -> int:
        return len(self._held)

    @property
    def available_tokens(self) -> int:
        return max(0, self._total - len(self._held))

    def _take(self, holder: str) -> Permit:
        permit = Permit(holder, next(self._serials))
        self._held[permit] = False
        self._borrowers[holder] = self._borrowers.get(holder, 0) + 1
        return permit

    def _wake(self) -> None:
        while self._waiters and len(self._held) < self._total:
            fut, holder = self._waiters.popleft()
            if not fut.done():  # a waiter cancelled meanwhile is skipped
                fut.set_result(self._take(holder))

    def acquire_nowait(self, holder: str = "") -> Permit:
        if self._waiters or len(self._held) >= self._total:
            raise CapacityFull(f"all {self._total} of the {self._name} are taken")
        return self._take(holder)

    async def acquire(self, holder: str = "") -> Permit:
        if not self._waiters and len(self._held) < self._total:
            return self._take(holder)
        fut: asyncio.Future[Permit] = asyncio.get_running_loop().create_future()
        self._waiters.append((fut, holder))
        try:
            return await fut
        except BaseException:
            # Cancelled after a permit was handed over but before this task resumed: give it back.
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise

    def mark_used(self, permit: Permit) -> None:
        if self._held.get(permit) is False:
            self._held[permit] = True
            self._in_use += 1

    def release(self, permit: Permit) -> bool:
        used = self._held.pop(permit, None)
        if used is None:
            return False
        if used:
            self._in_use -= 1
        held = self._borrowers[permit.holder]
        if held == 1:
            del self._borrowers[permit.holder]
        else:
            self._borrowers[permit.holder] = held - 1
        self._wake()
        return True

    def holds(self, holder: str) -> int:
        """How many permits ``holder`` has."""
        return self._borrowers.get(holder, 0)

    def _waiting(self) -> int:
        return sum(1 for fut, _ in self._waiters if not fut.done())

    def statistics(self) -> CapacityStatistics:
        held = len(self._held)
        return statistics_of(self._total, held - self._in_use, self._in_use, self._waiting(), self._borrowers)

    def __repr__(self) -> str:
        held = len(self._held)
        return (
            f"<{type(self).__name__} {held}/{self._total} ({held - self._in_use} reserved, "
            f"{self._in_use} in use), {self._waiting()} waiting>"
        )
