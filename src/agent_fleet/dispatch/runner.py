"""The dispatcher: run every session of a plan to an end, surviving failures.

Each session is driven by one coroutine in a TaskGroup: take a slot, run a fresh harness on it
(which resumes from the log), give the slot back. A failed or timed-out attempt is retried with
a new harness that resumes from the log — never restarted from scratch, never run twice to
completion; after ``max_attempts`` the session is failed for good. A preempted session is paused
and goes back for a slot, keeping the work it had done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.brain.harness import Harness, Outcome, SessionOutcome
from agent_fleet.brain.step import Limits
from agent_fleet.clock import Clock, RealClock
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.events import EventType
from agent_fleet.domain.plan import Partition
from agent_fleet.errors import ProviderError, UnreachableError
from agent_fleet.hands.port import Hands
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["DispatchOptions", "DispatchStats", "Dispatcher"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchOptions:
    session_timeout: float | None = None  # seconds per attempt; None = no limit
    max_attempts: int = 3
    retry_backoff: float = 1.0  # seconds × attempt number between attempts
    limits: Limits = field(default_factory=Limits)


@dataclass(slots=True)
class DispatchStats:
    total: int = 0
    queued: int = 0
    active: int = 0
    completed: int = 0
    failed: int = 0
    paused: int = 0
    preempted: int = 0
    attempts_failed: int = 0


class Dispatcher:
    def __init__(
        self,
        *,
        log: SessionLog,
        gateway: ModelGateway,
        hands_for: Callable[[Partition], Hands],
        slots: SessionSlots,
        clock: Clock | None = None,
        options: DispatchOptions | None = None,
    ) -> None:
        self._log = log
        self._gateway = gateway
        self._hands_for = hands_for
        self._slots = slots
        self._clock = clock or RealClock()
        self._opts = options or DispatchOptions()
        self._running: dict[str, asyncio.Task[SessionOutcome]] = {}
        self._preempt_reasons: dict[str, str] = {}
        self.stats = DispatchStats()
        slots.set_preempt_hook(self.preempt)

    def preempt(self, session_id: str, reason: str) -> None:
        """Stop a running session's attempt; it pauses and waits for a slot again."""
        task = self._running.get(session_id)
        if task is not None and not task.done():
            self._preempt_reasons[session_id] = reason
            task.cancel()

    async def run(self, sessions: list[tuple[str, Partition]]) -> dict[str, SessionOutcome]:
        self.stats.total += len(sessions)
        self.stats.queued += len(sessions)
        outcomes: dict[str, SessionOutcome] = {}
        async with asyncio.TaskGroup() as tg:
            for sid, partition in sessions:
                tg.create_task(self._drive(sid, partition, outcomes))
        return outcomes

    async def _drive(self, sid: str, partition: Partition, outcomes: dict[str, SessionOutcome]) -> None:
        attempt = 0
        while True:
            attempt += 1
            await self._slots.acquire(sid)
            self.stats.queued -= 1
            self.stats.active += 1
            error: str | None = None
            outcome: SessionOutcome | None = None
            try:
                outcome, error = await self._attempt(sid, partition, attempt)
            finally:
                self.stats.active -= 1
                self._slots.release(sid)
            if outcome is not None:
                self._count(outcome)
                outcomes[sid] = outcome
                return
            self.stats.queued += 1
            if error is None:  # preempted: not a failed attempt
                attempt -= 1
                continue
            self.stats.attempts_failed += 1
            kind = "timeout" if error.startswith("timed out") else "provider"
            failed = {"attempt": attempt, "kind": kind, "error": error}
            await self._log.emit_event(sid, EventType.ATTEMPT_FAILED, failed)
            if attempt >= self._opts.max_attempts:
                await self._log.emit_event(sid, EventType.SESSION_FAILED, {"error": error, "attempts": attempt})
                self.stats.queued -= 1
                outcome = SessionOutcome(sid, Outcome.FAILED, error)
                self._count(outcome)
                outcomes[sid] = outcome
                return
            await self._clock.sleep(self._opts.retry_backoff * attempt)

    async def _attempt(self, sid: str, partition: Partition, attempt: int) -> tuple[SessionOutcome | None, str | None]:
        """Run one attempt. Returns (outcome, None) when it ended, (None, error) when it failed,
        and (None, None) when it was preempted."""
        hands = self._hands_for(partition)
        harness = Harness(log=self._log, gateway=self._gateway, hands=hands, limits=self._opts.limits)
        # A task of its own so that preempt() can cancel this attempt without cancelling the run;
        # it is awaited right here, never left behind.
        task = asyncio.create_task(self._timed(harness, sid, attempt))
        self._running[sid] = task
        try:
            return await task, None
        except TimeoutError:
            return None, f"timed out after {self._opts.session_timeout} s"
        except (ProviderError, UnreachableError) as exc:
            return None, str(exc)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            reason = self._preempt_reasons.pop(sid, None)
            if reason is None or (me is not None and me.cancelling()):
                raise
            self.stats.preempted += 1
            await self._log.emit_event(sid, EventType.SESSION_PREEMPTED, {"reason": reason})
            return None, None
        finally:
            self._running.pop(sid, None)
            await hands.aclose()

    async def _timed(self, harness: Harness, sid: str, attempt: int) -> SessionOutcome:
        async with asyncio.timeout(self._opts.session_timeout):
            return await harness.run(sid, attempt=attempt)

    def _count(self, outcome: SessionOutcome) -> None:
        if outcome.outcome is Outcome.COMPLETED:
            self.stats.completed += 1
        elif outcome.outcome is Outcome.PAUSED:
            self.stats.paused += 1
        else:
            self.stats.failed += 1
