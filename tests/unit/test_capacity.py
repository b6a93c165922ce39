"""The shared capacity surface: CapacityLimiter on exact values and a virtual clock."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from agent_fleet.capacity import Capacity, CapacityFull, CapacityLimiter, Permit
from agent_fleet.clock import VirtualClock


async def test_holders_finish_at_exact_times_two_at_a_time() -> None:
    clock = VirtualClock()
    cap = CapacityLimiter(2)
    done: dict[str, float] = {}

    async def session(sid: str) -> None:
        permit = await cap.acquire(sid)
        cap.mark_used(permit)
        await clock.sleep(10.0)
        cap.release(permit)
        done[sid] = clock.now()

    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        for i in range(5):
            tg.create_task(session(f"s{i}"))
    assert done == {"s0": 10.0, "s1": 10.0, "s2": 20.0, "s3": 20.0, "s4": 30.0}
    assert cap.statistics().borrowed_tokens == 0


async def test_fifo_handoff_and_no_barging() -> None:
    cap = CapacityLimiter(1)
    first = cap.acquire_nowait("a")
    with pytest.raises(CapacityFull, match="all 1 of the capacity are taken"):
        cap.acquire_nowait("b")
    order: list[str] = []
    permits: dict[str, Permit] = {}

    async def waiter(name: str) -> None:
        permits[name] = await cap.acquire(name)
        order.append(name)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(waiter("b"))
        tg.create_task(waiter("c"))
        await asyncio.sleep(0)
        assert cap.statistics().tasks_waiting == 2
        assert repr(cap) == "<CapacityLimiter 1/1 (1 reserved, 0 in use), 2 waiting>"
        assert cap.release(first) and not cap.release(first)  # a second release gives nothing back
        await asyncio.sleep(0)
        with pytest.raises(CapacityFull):  # a newcomer cannot barge past the waiters
            cap.acquire_nowait("z")
        cap.release(permits["b"])
    assert order == ["b", "c"]
    stats = cap.statistics()
    assert (stats.borrowed_tokens, stats.total_tokens, dict(stats.borrowers)) == (1, 1, {"c": 1})


async def test_reserved_and_in_use_are_counted_apart() -> None:
    cap = CapacityLimiter(4)
    a1, a2, b1 = cap.acquire_nowait("a"), cap.acquire_nowait("a"), cap.acquire_nowait("b")
    stats = cap.statistics()
    assert (stats.reserved, stats.in_use, stats.available_tokens, dict(stats.borrowers)) == (3, 0, 1, {"a": 2, "b": 1})
    cap.mark_used(a2)
    cap.mark_used(a2)  # marking twice is marking once
    cap.mark_used(b1)
    assert (cap.statistics().reserved, cap.statistics().in_use) == (1, 2)
    assert repr(cap) == "<CapacityLimiter 3/4 (1 reserved, 2 in use), 0 waiting>"
    cap.release(a2)  # one of a's two permits: the used one goes, the reserved one stays
    assert (cap.statistics().reserved, cap.statistics().in_use, cap.holds("a")) == (1, 1, 1)
    cap.release(a1)
    cap.mark_used(a1)  # released: marking does nothing
    assert (cap.statistics().reserved, cap.statistics().in_use) == (0, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.reserved = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        stats.borrowers["a"] = 9  # type: ignore[index]


async def test_raising_total_wakes_waiters_and_lowering_revokes_nothing() -> None:
    cap = CapacityLimiter(1)
    cap.acquire_nowait("a")
    got: list[str] = []

    async def waiter(name: str) -> None:
        await cap.acquire(name)
        got.append(name)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(waiter("b"))
        tg.create_task(waiter("c"))
        await asyncio.sleep(0)
        cap.total = 3
        await asyncio.sleep(0)
    assert got == ["b", "c"]
    cap.total = 1
    assert cap.borrowed_tokens == 3 and cap.available_tokens == 0
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError):
            cap.total = bad  # type: ignore[assignment]


async def test_a_cancelled_waiter_leaks_no_permit() -> None:
    cap = CapacityLimiter(1)
    first = cap.acquire_nowait("a")
    task = asyncio.create_task(cap.acquire("b"))
    await asyncio.sleep(0)
    cap.release(first)  # handed to "b" and cancelled in the same step: it must come back
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cap.borrowed_tokens == 0
    cap.acquire_nowait("c")
    assert dict(cap.statistics().borrowers) == {"c": 1}


def primitive(kind: str) -> Any:
    """Each of the five primitives, with room for two sessions."""
    if kind == "limiter":
        from agent_fleet.spend.limiter import ConcurrencyLimiter

        return ConcurrencyLimiter(2)
    if kind == "local_slots":
        from agent_fleet.dispatch.slots import LocalSlots

        return LocalSlots(2)
    if kind == "start_gate":
        from agent_fleet.dispatch.starts import StartGate

        return StartGate(2)
    if kind == "pool":
        from agent_fleet.dispatch.pool import WorkerPool, WorkerSpec

        pool = WorkerPool(VirtualClock())
        for w in ("w1", "w2"):
            pool.register(WorkerSpec(worker_id=w))
        return pool
    from agent_fleet.admission import AdmissionController
    from agent_fleet.admission.kueue import default_objects
    from agent_fleet.admission.workload_slots import AdmissionSlots

    return AdmissionSlots(AdmissionController(default_objects(2), VirtualClock()))  # a pods quota of 2


@pytest.mark.parametrize("kind", ["limiter", "local_slots", "start_gate", "pool", "admission"])
async def test_every_primitive_has_the_one_surface(kind: str) -> None:
    cap: Capacity[Any] = primitive(kind)
    assert cap.total == (None if kind == "admission" else 2)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        if kind == "admission":
            tg.create_task(cap.run(stop))  # type: ignore[attr-defined]
        first = cap.acquire_nowait("a")
        second = await cap.acquire("b")
        with pytest.raises(CapacityFull):
            cap.acquire_nowait("c")
        cap.mark_used(first)
        stats = cap.statistics()
        assert (stats.reserved, stats.in_use, stats.tasks_waiting, dict(stats.borrowers)) == (1, 1, 0, {"a": 1, "b": 1})
        assert "1 reserved, 1 in use" in repr(cap)
        third = tg.create_task(cap.acquire("c"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not third.done() and cap.statistics().tasks_waiting == 1
        assert cap.release(first) and not cap.release(first)
        got = await third
        assert dict(cap.statistics().borrowers) == {"b": 1, "c": 1} and cap.statistics().in_use == 0
        cap.release(second)
        cap.release(got)
        assert cap.statistics().borrowed_tokens == 0
        stop.set()
