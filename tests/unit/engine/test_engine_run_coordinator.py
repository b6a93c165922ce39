"""A run coordinator's shutdown on a virtual clock: notify → drain → grace → cancel, safe twice.

Four sessions of two turns each; every model call takes one second of the virtual clock. At 0.5 s
the four first calls are in flight. A shutdown then shuts the door (no session is admitted any
more), preempts the running sessions at their turn boundary and waits, at most ``grace`` seconds,
for the sessions to give their slots back; then it cancels the task driving the run.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.config import FleetConfig
from agent_fleet.dispatch.slots import LocalSlots
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.plan import Plan
from agent_fleet.domain.usage import Usage
from agent_fleet.engine import Engine, RunOptions, plan_run
from agent_fleet.errors import StoreError
from agent_fleet.spend.gateway import Gateway
from agent_fleet.testing import FakeProvider, MemorySessionLog
from agent_fleet.testing.fakes import tool_call, turn_of

SESSIONS = 4
LATENCY = 1.0


def two_turns(request: ChatRequest) -> ChatResponse:
    """Turn 1 submits one result about the session's item, turn 2 finishes."""
    item = str(request.messages[1]["content"])
    tag = hashlib.sha256(item.encode()).hexdigest()[:8]
    if turn_of(request) == 1:
        found = {"items": [{"title": f"finding {tag}", "body": f"about {tag}"}]}
        return ChatResponse(None, (tool_call("submit_result", found, f"s-{tag}"),), Usage(10, 5))
    return ChatResponse(None, (tool_call("finish", {"summary": "done"}, f"f-{tag}"),), Usage(10, 5))


class Fleet:
    def __init__(self, tmp_path: Path, clock: VirtualClock) -> None:
        items = tmp_path / "items.txt"
        items.write_text("".join(f"item {n}\n" for n in range(SESSIONS)))
        self.options = RunOptions(
            task="Summarise each item",
            input_path=str(items),
            agents=SESSIONS,
            embedder="lexical",
            out_dir=str(tmp_path / "out"),
            max_concurrency=SESSIONS,
        )
        self.plan: Plan = plan_run(self.options)
        self.provider = FakeProvider(clock=clock, latency=LATENCY, script=[two_turns] * (4 * SESSIONS))
        gateway = Gateway(self.provider, clock=clock, concurrency=SESSIONS, adaptive=False, session_tokens=None)
        self.log = MemorySessionLog()
        self.engine = Engine(
            log=self.log, gateway=gateway, clock=clock, config=FleetConfig(), slots_for=lambda _o: LocalSlots(SESSIONS)
        )

    async def start(self, clock: VirtualClock) -> tuple[str, asyncio.Task[object]]:
        await self.log.open()
        run_id = await self.engine.create_run(self.plan, self.options, run_id="run-stop")
        task: asyncio.Task[object] = asyncio.create_task(self.engine.dispatch(run_id, self.plan, self.options))
        await clock.sleep(0.5)  # the four first calls are in flight
        assert self.provider.active == SESSIONS
        return run_id, task

    async def count(self, run_id: str, type: str) -> int:
        return len(await self.log.events_of_run(run_id, [type]))


async def test_a_shutdown_lets_the_calls_in_flight_land_then_cancels(tmp_path: Path) -> None:
    clock = VirtualClock()
    fleet = Fleet(tmp_path, clock)
    async with clock.auto_advance():
        run_id, task = await fleet.start(clock)
        (run,) = fleet.engine.coordinators()
        await run.shutdown(grace=5.0)
        assert clock.now() == LATENCY  # drained when the answers in flight were recorded, not at the grace
        assert task.cancelled()
        assert fleet.provider.calls == SESSIONS  # no session was let in for its second turn
        assert await fleet.count(run_id, EventType.MODEL_RESPONSE) == SESSIONS  # every paid answer is kept
        preempted = await fleet.log.events_of_run(run_id, [EventType.SESSION_PREEMPTED])
        assert len(preempted) == SESSIONS and {e.data["reason"] for e in preempted} == {"shutdown"}
        assert await fleet.count(run_id, EventType.SESSION_COMPLETED) == 0

        # the run is resumable: a new dispatch finishes it from the logs, sending only the second turns
        stats = await fleet.engine.dispatch(run_id, fleet.plan, fleet.options)
        assert stats.completed == SESSIONS
        assert fleet.provider.calls == 2 * SESSIONS
        assert clock.now() == 2 * LATENCY
    await fleet.engine.shutdown()


async def test_a_grace_shorter_than_the_calls_cancels_them(tmp_path: Path) -> None:
    clock = VirtualClock()
    fleet = Fleet(tmp_path, clock)
    async with clock.auto_advance():
        run_id, task = await fleet.start(clock)
        (run,) = fleet.engine.coordinators()
        await run.shutdown(grace=0.2)
        assert clock.now() == 0.5 + 0.2
        assert task.cancelled()
        assert fleet.provider.calls == SESSIONS and fleet.provider.active == 0
        assert await fleet.count(run_id, EventType.MODEL_RESPONSE) == 0
    await fleet.engine.shutdown()


async def test_shutdown_is_safe_to_call_twice_and_from_two_tasks_at_once(tmp_path: Path) -> None:
    clock = VirtualClock()
    fleet = Fleet(tmp_path, clock)
    async with clock.auto_advance():
        _run_id, task = await fleet.start(clock)
        (run,) = fleet.engine.coordinators()
        await asyncio.gather(run.shutdown(grace=5.0), run.shutdown(grace=5.0))
        assert clock.now() == LATENCY and task.cancelled()
        await run.shutdown(grace=5.0)  # a third time: nothing left to stop
        assert clock.now() == LATENCY
        assert fleet.provider.calls == SESSIONS


async def test_engine_shutdown_stops_its_runs_then_closes_its_parts_once(tmp_path: Path) -> None:
    clock = VirtualClock()
    fleet = Fleet(tmp_path, clock)
    async with clock.auto_advance():
        run_id, task = await fleet.start(clock)
        await fleet.engine.shutdown(grace=5.0)
        assert clock.now() == LATENCY and task.cancelled()
        assert fleet.engine.coordinators() == []
        await fleet.engine.shutdown(grace=5.0)  # safe twice
    with pytest.raises(StoreError):
        await fleet.log.emit_event(run_id, EventType.RUN_RESUMED, {})  # the log is closed


async def test_a_coordinator_nobody_drives_shuts_down_at_once(tmp_path: Path) -> None:
    clock = VirtualClock()
    fleet = Fleet(tmp_path, clock)
    await fleet.log.open()
    run = fleet.engine.coordinator("run-idle", fleet.plan, fleet.options)
    await run.shutdown(grace=5.0)
    await run.shutdown(grace=5.0)
    assert clock.now() == 0.0
    await fleet.engine.shutdown()
