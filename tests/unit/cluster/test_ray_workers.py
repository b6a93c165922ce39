"""The dispatcher's side of the Ray executor, with node workers stood in by in-process objects that
write to their own session-log connections (as a node's process does): placement by resources, a
lost node's sessions moving to another node, and a *zombie* — an attempt on a node declared lost
that keeps running and writes late — refused by the session's attempt fence."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agent_fleet.brain.port import Limits
from agent_fleet.cluster.workers import (
    AttemptOrder,
    NodeWorker,
    RayBody,
    RayWorkerPool,
    SessionRequest,
    WorkerLost,
    answer_of,
    error_answer,
    node_capacity,
)
from agent_fleet.dispatch.health import HealthConfig
from agent_fleet.dispatch.pool import WorkerSpec
from agent_fleet.dispatch.runner import Dispatcher, DispatchOptions
from agent_fleet.dispatch.slots import LocalSlots
from agent_fleet.domain.events import EventType
from agent_fleet.domain.outcomes import Outcome
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import LeaseLost, RateLimited, StoreUnavailable
from agent_fleet.session.lease import LeaseOwner, attempt_fence, bump_attempt_fence
from agent_fleet.session.memory import MemorySessionLog, MemoryStore
from agent_fleet.testing.fakes import FakeGateway

RUN = "run-00000000zomb"
SID = f"{RUN}.s00000"
PARTITION = Partition(id="p0", index=0, kind=InputKind.LIST, items=("a",), item_ids=(0,), est_tokens=5)
ENGINE = LeaseOwner("engine", 1, 1.0)


def test_a_node_holds_the_sessions_its_resources_fit() -> None:
    asks = SessionRequest(num_cpus=0.25, memory=100, resources={"gpu_slot": 0.5})
    assert node_capacity({"CPU": 4, "memory": 1000, "gpu_slot": 2}, asks, most=1000) == 4
    assert node_capacity({"CPU": 4, "memory": 250, "gpu_slot": 2}, asks, most=1000) == 2
    assert node_capacity({"CPU": 4, "memory": 1000}, asks, most=1000) == 0  # no gpu_slot there
    assert node_capacity({"CPU": 0}, SessionRequest(num_cpus=0.01), most=50) == 0  # a head kept free
    assert node_capacity({"CPU": 2}, SessionRequest(num_cpus=0.01), most=50) == 50
    assert node_capacity({"CPU": 1}, SessionRequest(num_cpus=0.01), most=500) == 100
    assert SessionRequest(num_cpus=0.01, memory=10, resources={"x": 1}).actor_options(100) == {
        "num_cpus": 1.0,
        "memory": 1000,
        "resources": {"x": 100},
    }


def test_answers_are_raised_as_the_dispatcher_classifies_them() -> None:
    assert answer_of(SID, {"outcome": "paused", "reason": "budget"}, "w").outcome is Outcome.PAUSED
    limited = RateLimited("429 from the gateway", status=429, retry_after=2.0)
    try:
        answer_of(SID, error_answer(limited), "w")
    except RateLimited as exc:
        assert (str(exc), exc.status, exc.retry_after) == ("429 from the gateway", 429, 2.0)
    for lost in (StoreUnavailable("no store on this node"), ValueError("boom")):
        try:
            answer_of(SID, error_answer(lost), "w")
        except WorkerLost as exc:  # the node's trouble, not the run's: the session moves to another node
            assert "w" in str(exc)
    try:
        answer_of(SID, error_answer(LeaseLost("run taken over")), "w")
    except LeaseLost:
        pass  # the run's lease moved on: the engine stops


class _Node:
    """A node worker stood in: ``run.remote(order)`` starts the attempt on this node's own log."""

    def __init__(self, store: MemoryStore, body: Callable[[MemorySessionLog, AttemptOrder], Awaitable[dict[str, Any]]]):
        self.log = MemorySessionLog(store)
        self._body = body
        self.tasks: list[asyncio.Task[dict[str, Any]]] = []
        self.run = self

    def remote(self, order: AttemptOrder) -> Awaitable[dict[str, Any]]:
        async def attempt() -> dict[str, Any]:
            attempt_fence.set(order.fence)  # what the node worker does: its writes carry the fence
            return await self._body(self.log, order)

        task = asyncio.get_running_loop().create_task(attempt())
        self.tasks.append(task)
        return asyncio.shield(task)  # the engine giving up does not stop a partitioned node


async def test_a_lost_nodes_late_writes_are_refused_and_the_session_completes_elsewhere() -> None:
    store = MemoryStore()
    engine_log = MemorySessionLog(store)
    await engine_log.open()
    await engine_log.emit_event(SID, EventType.SESSION_CREATED, {"run_id": RUN})
    release = asyncio.Event()
    late: list[object] = []
    started = asyncio.Event()

    async def stalls(log: MemorySessionLog, order: AttemptOrder) -> dict[str, Any]:
        await log.emit_event(order.session_id, EventType.SESSION_STARTED, {"attempt": order.number, "node": "A"})
        started.set()
        await release.wait()  # partitioned: the engine hears nothing more from it
        try:
            late.append(await log.emit_event(order.session_id, EventType.MODEL_REQUEST, {"node": "A", "late": True}))
        except LeaseLost as exc:
            late.append(exc)
        return {"outcome": "completed"}

    async def completes(log: MemorySessionLog, order: AttemptOrder) -> dict[str, Any]:
        await log.emit_events(
            order.session_id,
            [(EventType.SESSION_RESUMED, {"attempt": order.number, "node": "B"}), (EventType.SESSION_COMPLETED, {})],
        )
        return {"outcome": "completed"}

    a, b = _Node(store, stalls), _Node(store, completes)
    for node in (a, b):
        await node.log.open()
    pool = RayWorkerPool(_clock(), health=HealthConfig(dead_after=0.3, hung_after=60.0))
    pool.register(WorkerSpec(worker_id="ray-A", max_load=1))  # node B joins only later
    workers = {"ray-A": NodeWorker("ray-A", "node-a", a, 1), "ray-B": NodeWorker("ray-B", "node-b", b, 1)}

    async def fence(sid: str) -> int:
        return await bump_attempt_fence(engine_log, sid, ENGINE, now=1.0)

    body = RayBody(
        workers=workers, pool=pool, fence=fence, token=lambda sid: "fgh-x", run_id=RUN, run_epoch=None, limits=Limits()
    )
    dispatcher = Dispatcher(
        log=engine_log,
        gateway=FakeGateway(),
        hands_for=lambda p: None,  # type: ignore[arg-type,return-value]
        slots=LocalSlots(1),
        pool=pool,
        body=body,
        options=DispatchOptions(check_interval=0.05),
    )
    run = asyncio.create_task(dispatcher.run([(SID, PARTITION)]))
    await asyncio.wait_for(started.wait(), 5)
    assert pool.lose("ray-A") and not pool.lose("ray-A")  # Ray reports node A dead
    while not any(e.type == EventType.ATTEMPT_FAILED for e in await engine_log.get_events(SID)):
        await asyncio.sleep(0.02)  # declared lost; no other node yet, so no newer attempt has started
    release.set()  # the zombie wakes up and writes
    await asyncio.wait_for(a.tasks[0], 5)
    assert len(late) == 1 and isinstance(late[0], LeaseLost), late
    pool.register(WorkerSpec(worker_id="ray-B", max_load=1))
    outcomes = await asyncio.wait_for(run, 10)
    assert outcomes[SID].outcome is Outcome.COMPLETED
    events = await engine_log.get_events(SID)
    assert not any(e.data.get("late") for e in events)
    kinds = [(e.type, e.data.get("node") or e.data.get("worker")) for e in events]
    assert kinds == [
        (EventType.SESSION_CREATED, None),
        (EventType.SESSION_STARTED, "A"),
        (EventType.ATTEMPT_FAILED, "ray-A"),
        (EventType.SESSION_RESUMED, "B"),
        (EventType.SESSION_COMPLETED, None),
    ]
    assert [e.data["kind"] for e in events if e.type == EventType.ATTEMPT_FAILED] == ["dead"]
    for node in (a, b):
        await node.log.close()
    await engine_log.close()


def _clock() -> Any:
    from agent_fleet.clock import RealClock

    return RealClock()


def test_the_executor_setting_is_checked_before_anything_runs() -> None:
    import pytest

    from agent_fleet.config import FleetConfig, check_executor
    from agent_fleet.errors import UsageError
    from agent_fleet.options import RunOptions, with_config

    for ok in ("local", "ray:auto", "ray://10.0.0.5:6379", "ray://head.example:10001"):
        assert check_executor(ok) == ok
    for bad in ("ray", "ray://", "ray://head", "ray://head:port", "ray://head:70000", "kubernetes"):
        with pytest.raises(ValueError, match="executor must be local, ray:auto or ray://HOST:PORT"):
            check_executor(bad)
    with pytest.raises(UsageError, match=r"^--executor: executor must be"):
        RunOptions(task="t", executor="ray:nowhere")
    config = FleetConfig.model_validate({"dispatch": {"executor": "ray:auto", "ray": {"num_cpus": 0.5}}})
    assert config.dispatch.ray.num_cpus == 0.5
    assert with_config(RunOptions(task="t"), config).executor == "ray:auto"
    assert with_config(RunOptions(task="t", executor="local"), config).executor == "local"  # the flag wins
    with pytest.raises(ValueError, match="executor must be"):
        FleetConfig.model_validate({"dispatch": {"executor": "ray://nowhere"}})
