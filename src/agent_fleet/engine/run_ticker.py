"""What a live run does once per tick besides running sessions: apply budget raises made from
another process, send paused sessions back in, and store the snapshots ``status``, ``queues`` and
``metrics`` read."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_fleet.aggregate.live import LiveDedup, snapshot_key
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.domain.payloads import BudgetRaised, SessionPaused
from agent_fleet.spend.gateway import apply_budget_event

if TYPE_CHECKING:
    from agent_fleet.engine.core import Engine
    from agent_fleet.supervise import ShapeWatch

__all__ = ["Resend", "RunTicker"]

Resend = Callable[[list[str]], None]
"""Sends paused sessions (by id) back in: the run starts them again beside the sessions running."""


class RunTicker:
    """Applies ``budget_raised`` events to the live gateway and sends paused sessions back in.

    ``agent-fleet budget raise`` appends the event from another process; this polls the run's
    stream and the streams of sessions paused on budget, once per tick.

    Budgets have versions: a run-wide raise bumps the run's, a session raise that session's. A
    session paused on budget goes back in when the budget now in force is newer than the one it
    last ran under — so a pause decided just before a raise, and recorded just after it, is never
    left behind. Sending one back needlessly costs a refused check, never a model call.
    """

    TICK = 0.5

    def __init__(self, engine: Engine, run_id: str, slots: SessionSlots) -> None:
        self._engine = engine
        self._run_id = run_id
        self._slots = slots
        self._seen: dict[str, int] = {}
        self._run_version = 0
        self._session_version: dict[str, int] = {}
        self._ran_under: dict[str, tuple[int, int]] = {}  # session → budget version it last ran under
        self.live: LiveDedup | None = None
        self.shapes: ShapeWatch | None = None  # supervision.shape.pause: sessions far off the run's shape

    def _version(self, sid: str) -> tuple[int, int]:
        return (self._run_version, self._session_version.get(sid, 0))

    async def store_snapshot(self) -> None:
        """Admission state for ``agent-fleet queues``; the live dedup rate for ``agent-fleet status``."""
        snapshot = getattr(self._slots, "snapshot", None)
        if snapshot is not None:
            await self._engine.log.put_snapshot("admission", {"run_id": self._run_id, **snapshot()})
        if self.live is not None:
            await self._engine.log.put_snapshot(snapshot_key(self._run_id), self.live.stats())
        await self._engine.record_embeddings(self._run_id)
        controller = getattr(self._slots, "controller", None)
        admission = controller.metrics_text() if controller is not None else b""
        source = str(getattr(controller, "uid", "")) if controller is not None else ""
        await self._engine.store_metrics(self._run_id, admission, source=source)

    async def apply_recorded(self) -> None:
        """On start (and resume): every raise already in the log; sessions start under those."""
        log = self._engine.log
        for ev in await log.get_events(self._run_id):
            if (raised := decode_as(ev, BudgetRaised)) is not None:
                apply_budget_event(self._engine.gateway, self._run_id, raised.record)
            self._seen[self._run_id] = ev.seq
        for ev in await log.events_of_run(self._run_id, [EventType.BUDGET_RAISED]):
            if (raised := decode_as(ev, BudgetRaised)) is not None:
                apply_budget_event(self._engine.gateway, ev.session_id, raised.record)
            self._seen[ev.session_id] = max(self._seen.get(ev.session_id, 0), ev.seq)

    async def _apply_new_raises(self, paused: list[str]) -> None:
        log = self._engine.log
        for sid in [self._run_id, *paused]:
            for ev in await log.get_events(sid, after=self._seen.get(sid, 0)):
                self._seen[sid] = ev.seq
                if (raised := decode_as(ev, BudgetRaised)) is not None:
                    apply_budget_event(self._engine.gateway, sid, raised.record)
                    if sid == self._run_id:
                        self._run_version += 1
                    else:
                        self._session_version[sid] = self._session_version.get(sid, 0) + 1

    async def tick(self, resend: Resend) -> bool:
        """One round; True when it sent sessions back in (through ``resend``)."""
        paused = [
            r.session_id for r in await self._engine.log.list_sessions(self._run_id) if r.state is SessionState.PAUSED
        ]
        if not paused:
            return False
        await self._apply_new_raises(paused)
        again = [sid for sid in paused if await self._unblocked(sid)]
        if not again:
            return False
        for sid in again:
            self._ran_under[sid] = self._version(sid)
        resend(again)
        return True

    async def poll_until(self, resend: Resend) -> None:
        while True:
            await self._engine.clock.sleep(self.TICK)
            await self.store_snapshot()
            await self._engine.flush_routes()
            if self.shapes is not None:
                await self._engine.pause_outliers(self._run_id, self.shapes)
            await self.tick(resend)

    async def _unblocked(self, sid: str) -> bool:
        if self._ran_under.get(sid, (0, 0)) >= self._version(sid):
            return False
        for ev in reversed(await self._engine.log.get_events(sid)):
            if (paused := decode_as(ev, SessionPaused)) is not None:
                return paused.reason == "budget"
        return False
