"""One owner per run: a lease in the session store, renewed by a heartbeat, fenced by its epoch.

A run's lease row names its owner (host, pid, start), the last heartbeat and when it expires. An
engine takes the lease before it writes anything of the run and renews it every ``ttl / 3``
seconds; it gives it back (expiry now, epoch kept) when it stops. A lease whose expiry has passed
is taken over, and so is one whose owner pid is gone on this very host (a crash: no need to wait).
Every take bumps the *epoch*; every append of the run's sessions carries the epoch its engine
holds, and the store refuses it (:class:`~agent_fleet.errors.LeaseLost`) when the row has moved
on, in the same transaction as the append — a frozen or split-brain engine cannot write twice.

:func:`claim` is the pure decision; the stores give an atomic compare-and-swap on the epoch
(:class:`LeaseStore`), so two engines claiming at once cannot both win.

**Attempt fences.** When a session's attempts run on other machines (the Ray executor), each attempt
holds a fence of its own: a lease row keyed by the *session* id whose epoch the dispatcher bumps
(:func:`bump_attempt_fence`) before it starts an attempt and again when it declares one lost. The
attempt's writes carry the epoch it was given (:data:`attempt_fence`, set in the attempt's task), and
the store refuses them, in the append's own transaction, once the row has moved on: a node declared
lost cannot write into a session another node has taken over.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agent_fleet.clock import Clock, RealClock
from agent_fleet.errors import RunOwned

__all__ = [
    "DEFAULT_TTL_S",
    "attempt_fence",
    "bump_attempt_fence",
    "Lease",
    "LeaseKeeper",
    "LeaseOwner",
    "LeaseStore",
    "claim",
    "owned_message",
    "pid_alive",
    "this_process",
]

_logger = logging.getLogger(__name__)

DEFAULT_TTL_S = 30.0  # a crashed owner on another host is taken over this long after its last heartbeat
_WAIT_POLL_S = 1.0


@dataclass(frozen=True, slots=True)
class LeaseOwner:
    host: str
    pid: int
    start: float  # wall-clock time the owner process took its first lease (tells a reused pid apart)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


@dataclass(frozen=True, slots=True)
class Lease:
    run_id: str
    epoch: int
    owner: LeaseOwner
    heartbeat: float  # wall-clock seconds
    expires: float

    def live_at(self, now: float) -> bool:
        return now < self.expires


@runtime_checkable
class LeaseStore(Protocol):
    """What a session store gives the lease (SQLite, PostgreSQL and memory all do)."""

    async def read_lease(self, run_id: str) -> Lease | None: ...

    async def swap_lease(self, lease: Lease, expected_epoch: int | None) -> bool:
        """Write ``lease`` iff the row's epoch is ``expected_epoch`` (None: no row yet); atomic."""

    def fence(self, run_id: str, epoch: int | None) -> None:
        """From now on every append to the run's sessions carries ``epoch`` (None: unfenced)."""


attempt_fence: contextvars.ContextVar[int | None] = contextvars.ContextVar("attempt_fence", default=None)
"""The attempt fence the current task writes under (None: none). Tasks it starts inherit it."""


async def bump_attempt_fence(store: LeaseStore, session_id: str, holder: LeaseOwner, *, now: float) -> int:
    """Move the session's attempt fence on and return the new epoch: writes under any older one are
    refused from now on. A compare-and-swap, retried while another writer moves the row meanwhile."""
    while True:
        current = await store.read_lease(session_id)
        epoch = 1 if current is None else current.epoch + 1
        if await store.swap_lease(
            Lease(session_id, epoch, holder, now, now), None if current is None else current.epoch
        ):
            return epoch


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def this_process(now: float | None = None) -> LeaseOwner:
    """This process as an owner; ``start`` (when it takes the lease) tells two engines of one process apart."""
    return LeaseOwner(host=socket.gethostname(), pid=os.getpid(), start=time.time() if now is None else now)


def claim(
    current: Lease | None,
    me: LeaseOwner,
    *,
    run_id: str,
    now: float,
    ttl: float,
    alive: Callable[[int], bool] = pid_alive,
    this_host: str | None = None,
) -> Lease | None:
    """The lease ``me`` may write now, or None while another live owner holds it.

    Free (no row, given back, expired) or abandoned (its pid is gone on this host): taken, epoch + 1.
    Already ours: renewed under the same epoch.
    """
    if current is None:
        return Lease(run_id, 1, me, now, now + ttl)
    if current.owner == me:
        return Lease(run_id, current.epoch, me, now, now + ttl)
    host = this_host if this_host is not None else me.host
    abandoned = current.owner.host == host and not alive(current.owner.pid)
    if current.live_at(now) and not abandoned:
        return None
    return Lease(run_id, current.epoch + 1, me, now, now + ttl)


def owned_message(current: Lease, now: float) -> str:
    left = max(0.0, current.expires - now)
    return (
        f"run {current.run_id} is owned by {current.owner.describe()} "
        f"(heartbeat {max(0.0, now - current.heartbeat):.0f} s ago, lease expires in {left:.0f} s); "
        "use --wait to wait for it"
    )


class LeaseKeeper:
    """Holds one run's lease for an engine: takes it, renews it, gives it back."""

    def __init__(
        self,
        store: LeaseStore,
        lease: Lease,
        *,
        ttl: float,
        clock: Clock,
        wall: Callable[[], float],
    ) -> None:
        self.store = store
        self.lease = lease
        self.ttl = ttl
        self.lost = False
        self._clock = clock
        self._wall = wall
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def take(
        cls,
        store: LeaseStore,
        run_id: str,
        *,
        wait: bool = False,
        ttl: float = DEFAULT_TTL_S,
        owner: LeaseOwner | None = None,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
        alive: Callable[[int], bool] = pid_alive,
    ) -> LeaseKeeper:
        """Take the run's lease (waiting for a live owner with ``wait``, else RunOwned) and fence."""
        me = owner or this_process()
        clock = clock or RealClock()
        while True:
            current = await store.read_lease(run_id)
            now = wall()
            mine = claim(current, me, run_id=run_id, now=now, ttl=ttl, alive=alive)
            if mine is not None:
                if await store.swap_lease(mine, None if current is None else current.epoch):
                    store.fence(run_id, mine.epoch)
                    return cls(store, mine, ttl=ttl, clock=clock, wall=wall)
                continue  # another engine moved the row between the read and the swap: look again
            assert current is not None
            if not wait:
                raise RunOwned(owned_message(current, now))
            await clock.sleep(min(_WAIT_POLL_S, max(0.05, current.expires - now)))

    async def renew(self) -> bool:
        """One heartbeat; False once another engine holds the lease (this one is then lost)."""
        if self.lost:
            return False
        now = self._wall()
        renewed = Lease(self.lease.run_id, self.lease.epoch, self.lease.owner, now, now + self.ttl)
        if await self.store.swap_lease(renewed, self.lease.epoch):
            self.lease = renewed
            return True
        self.lost = True
        _logger.error("run %s: the lease (epoch %d) was taken over", self.lease.run_id, self.lease.epoch)
        return False

    def start(self) -> None:
        """Renew every ``ttl / 3`` seconds until :meth:`release`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat(), name="run-lease-heartbeat")

    async def _beat(self) -> None:
        while not self.lost:
            await self._clock.sleep(self.ttl / 3)
            try:
                await self.renew()
            except Exception as exc:  # a store hiccup: the next beat tries again before expiry
                _logger.warning("run %s: lease heartbeat failed: %s", self.lease.run_id, exc)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def release(self) -> None:
        """Stop the heartbeat and give the lease back (expired now, epoch kept: late writes still fenced)."""
        await self.stop()
        if self.lost:
            return
        now = self._wall()
        given_back = Lease(self.lease.run_id, self.lease.epoch, self.lease.owner, self.lease.heartbeat, now)
        with contextlib.suppress(Exception):  # the store may be gone; the lease then just expires
            await self.store.swap_lease(given_back, self.lease.epoch)
