"""Fault injection for live runs: workers that crash or hang mid-session, sandboxes that die under a
running command. Everything is wired through constructor parameters (no globals):

* :class:`WorkerFaults` is a dispatcher ``Interposer``: every attempt on a *crashing* worker raises
  :class:`InjectedCrash`, and every attempt on a *hanging* worker stops for good, at its ``n``-th
  session-log write (``n`` drawn from ``strike_at``) or at its last one, whichever comes first —
  the write is never made, so a bad worker never completes a session;
* :class:`FaultySandboxes` wraps a :class:`~agent_fleet.hands.port.SandboxProvider`: a share
  of commands find their sandbox killed while they run (every process of the sandbox killed, its
  workspace removed), exactly as when the sandbox's host process dies.

The random choices come from seeded :class:`random.Random` instances, so a test is repeatable.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Unpack

from agent_fleet.dispatch.port import Lease
from agent_fleet.domain.events import Event, EventType
from agent_fleet.errors import FleetError
from agent_fleet.hands.port import (
    CommandOptions,
    CompletedRun,
    ProvisionOptions,
    ResourceSpec,
    Sandbox,
    SandboxProvider,
    SandboxState,
)
from agent_fleet.session.port import ForwardingLog, SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["FaultySandboxes", "InjectedCrash", "WorkerFaults"]

_LAST = frozenset({EventType.SESSION_COMPLETED, EventType.SESSION_PAUSED, EventType.SESSION_FAILED})


class InjectedCrash(FleetError):
    """A worker crash made on purpose."""


class WorkerFaults:
    """Crashing and hanging workers, by worker id."""

    def __init__(
        self,
        *,
        crash: Collection[str] = (),
        hang: Collection[str] = (),
        strike_at: tuple[int, int] = (2, 5),
        seed: int = 0,
    ) -> None:
        self.crash = frozenset(crash)
        self.hang = frozenset(hang)
        self._strike = strike_at
        self._rng = random.Random(seed)
        self.struck: Counter[str] = Counter()  # faults that happened, by worker
        self.attempts: Counter[str] = Counter()  # attempts started, by worker

    @classmethod
    def pick(
        cls, workers: Sequence[str], *, crash_rate: float, hang_rate: float, seed: int = 0, **kw: Any
    ) -> WorkerFaults:
        """Choose ``crash_rate`` of the workers to crash and ``hang_rate`` to hang (disjoint)."""
        rng = random.Random(seed)
        order = list(workers)
        rng.shuffle(order)
        n_crash, n_hang = round(len(order) * crash_rate), round(len(order) * hang_rate)
        return cls(crash=order[:n_crash], hang=order[n_crash : n_crash + n_hang], seed=seed, **kw)

    def __call__(self, lease: Lease, log: SessionLog, gateway: ModelGateway) -> tuple[SessionLog, ModelGateway]:
        self.attempts[lease.worker_id] += 1
        if lease.worker_id in self.crash:
            return _FaultyLog(log, self, lease.worker_id, "crash", self._rng.randint(*self._strike)), gateway
        if lease.worker_id in self.hang:
            return _FaultyLog(log, self, lease.worker_id, "hang", self._rng.randint(*self._strike)), gateway
        return log, gateway

    def __repr__(self) -> str:
        return f"WorkerFaults(crash={sorted(self.crash)}, hang={sorted(self.hang)}, struck={dict(self.struck)})"


class _FaultyLog(ForwardingLog):
    """The attempt's log on a bad worker: the ``strike``-th write (or the last) never happens."""

    def __init__(self, inner: SessionLog, faults: WorkerFaults, worker: str, mode: str, strike: int) -> None:
        super().__init__(inner)
        self._faults = faults
        self._worker = worker
        self._mode = mode
        self._strike = strike
        self._writes = 0

    async def _gate(self, types: Sequence[str]) -> None:
        self._writes += 1
        if self._writes < self._strike and not _LAST.intersection(types):
            return
        self._faults.struck[self._worker] += 1
        if self._mode == "crash":
            raise InjectedCrash(f"worker {self._worker} crashed (injected)")
        await asyncio.Event().wait()  # hung: only cancellation ends this

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        await self._gate([type])
        return await self.inner.emit_event(session_id, type, data)

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        await self._gate([t for t, _ in events])
        return await self.inner.emit_events(session_id, events)


class FaultySandboxes:
    """A sandbox provider whose sandboxes die under ``rate`` of the commands they run; with
    ``max_in_a_row``, never more than that many commands of one session in a row (so a caller that
    retries that often always gets through)."""

    def __init__(self, inner: SandboxProvider, *, rate: float, seed: int = 0, max_in_a_row: int | None = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        self.inner = inner
        self.rate = rate
        self.max_in_a_row = max_in_a_row
        self._rng = random.Random(seed)
        self._streak: Counter[str] = Counter()
        self.provisioned = 0
        self.killed = 0  # commands whose sandbox died under them

    async def provision(self, resources: ResourceSpec, **options: Unpack[ProvisionOptions]) -> _FaultySandbox:
        box = await self.inner.provision(resources, **options)
        self.provisioned += 1
        return _FaultySandbox(box, self)

    def doomed(self, session_id: str) -> bool:
        capped = self.max_in_a_row is not None and self._streak[session_id] >= self.max_in_a_row
        if capped or self._rng.random() >= self.rate:
            self._streak[session_id] = 0
            return False
        self._streak[session_id] += 1
        return True

    def __repr__(self) -> str:
        return f"FaultySandboxes(rate={self.rate}, provisioned={self.provisioned}, killed={self.killed})"


class _FaultySandbox:
    def __init__(self, box: Sandbox, owner: FaultySandboxes) -> None:
        self._box = box
        self._owner = owner
        self.sandbox_id = box.sandbox_id
        self.session_id = box.session_id
        self.workdir = box.workdir

    @property
    def state(self) -> SandboxState:
        return self._box.state

    async def run(self, command: str | Sequence[str], **options: Unpack[CommandOptions]) -> CompletedRun:
        if not self._owner.doomed(self.session_id):
            return await self._box.run(command, **options)
        # The command is under way (a process that would outlive the kill) when the sandbox dies.
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(self._box.run("sleep 30", timeout=60))
            while not running.done():  # until the command is seen dying (it may still be starting)
                await asyncio.sleep(0.05)
                await asyncio.to_thread(self._die)
        self._owner.killed += 1
        return running.result()

    def _die(self) -> None:
        self._box.kill_processes()
        shutil.rmtree(self._box.workdir, ignore_errors=True)

    def kill_processes(self) -> list[int]:
        return self._box.kill_processes()

    async def capture(self, scratch: Sequence[str] = ()) -> dict[str, Any] | None:
        return await self._box.capture(scratch)

    async def aclose(self) -> None:
        await self._box.aclose()
