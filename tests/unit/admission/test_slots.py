"""AdmissionSlots: the dispatcher's slots over the admission controller, under every order in
which admission, preemption and the dispatcher's calls can arrive."""

from __future__ import annotations

import asyncio

import pytest
from admission_builders import cq, flavor, lq

from agent_fleet.admission import AdmissionController, Workload, parse_objects
from agent_fleet.admission.workload_slots import AdmissionRefused, AdmissionSlots
from agent_fleet.capacity import CapacityFull
from agent_fleet.clock import VirtualClock


def controller(pods: int = 1) -> AdmissionController:
    objects = parse_objects(
        [flavor(), cq("q", {"pods": pods}, preemption={"withinClusterQueue": "LowerPriority"}), lq("q", "q")]
    )
    return AdmissionController(objects, VirtualClock())


def slots_with_hook(ctl: AdmissionController, **kw: object) -> tuple[AdmissionSlots, list[tuple[str, str]]]:
    slots = AdmissionSlots(ctl, queue="q", drive=False, **kw)  # type: ignore[arg-type]
    calls: list[tuple[str, str]] = []
    slots.set_preempt_hook(lambda sid, reason, by: calls.append((sid, reason)))
    return slots, calls


async def test_acquire_waits_again_when_preempted_before_it_resumed() -> None:
    ctl = controller()
    slots, calls = slots_with_hook(ctl)
    task = asyncio.create_task(slots.acquire("s1"))
    await asyncio.sleep(0)
    ctl.settle()  # s1 admitted: its future is set, but the task has not run yet
    ctl.submit(Workload(name="hi", queue="q", priority=5))
    ctl.settle()  # ... and s1 is preempted before it resumes
    assert calls == [("s1", "InClusterQueue")]
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()  # it must not run without quota
    ctl.finish("hi")
    ctl.settle()
    await asyncio.wait_for(task, 1)
    assert ctl.admitted() == ["s1"]


async def test_release_after_preemption_resubmits_with_the_first_creation_time() -> None:
    ctl = controller()
    slots, calls = slots_with_hook(ctl)
    task = asyncio.create_task(slots.acquire("s1"))
    await asyncio.sleep(0)
    ctl.settle()
    permit = await task
    ctl.clock.advance(10)  # type: ignore[attr-defined]
    ctl.submit(Workload(name="hi", queue="q", priority=5, created=10))
    ctl.settle()
    assert calls == [("s1", "InClusterQueue")]
    assert slots.release(permit)  # the cancelled attempt gives its slot back
    ctl.clock.advance(5)  # type: ignore[attr-defined]
    again = asyncio.create_task(slots.acquire("s1"))
    await asyncio.sleep(0)
    assert ctl.workloads["s1"].created == 0  # keeps its place in the queue order
    ctl.finish("hi")
    ctl.settle()
    permit = await asyncio.wait_for(again, 1)
    assert slots.release(permit) and not slots.release(permit)
    assert ctl.workloads == {}
    assert ctl.admitted() == []


async def test_release_of_a_session_preempted_as_it_finished_leaves_nothing_behind() -> None:
    ctl = controller()
    slots, calls = slots_with_hook(ctl)
    task = asyncio.create_task(slots.acquire("s1"))
    await asyncio.sleep(0)
    ctl.settle()
    permit = await task
    ctl.submit(Workload(name="hi", queue="q", priority=5))
    ctl.settle()
    assert calls == [("s1", "InClusterQueue")]  # s1 preempted; its attempt had already completed, so no acquire follows
    assert slots.release(permit)
    assert "s1" not in ctl.workloads
    ctl.settle()
    assert ctl.admitted() == ["hi"]
    assert ctl.pending() == ([], [])


async def test_readmitted_before_release_frees_quota_once() -> None:
    ctl = controller()
    slots, _ = slots_with_hook(ctl)
    task = asyncio.create_task(slots.acquire("s1"))
    await asyncio.sleep(0)
    ctl.settle()
    permit = await task
    ctl.submit(Workload(name="hi", queue="q", priority=5))
    ctl.settle()
    ctl.finish("hi")
    ctl.settle()  # s1 readmitted while its cancelled attempt has not released yet
    assert ctl.admitted() == ["s1"]
    assert slots.release(permit)
    assert ctl.admitted() == [] and ctl.workloads == {}
    again = asyncio.create_task(slots.acquire("s1"))
    await asyncio.sleep(0)
    ctl.settle()
    await asyncio.wait_for(again, 1)
    assert ctl.admitted() == ["s1"]
    node = ctl.cache.cluster_queues["q"]
    assert node.usage[("default", "pods")] == 1  # held once, not twice


async def test_cancelled_acquire_leaves_the_queue() -> None:
    ctl = controller()
    slots, _ = slots_with_hook(ctl)
    first = asyncio.create_task(slots.acquire("s1"))
    second = asyncio.create_task(slots.acquire("s2"))
    await asyncio.sleep(0)
    ctl.settle()
    await first
    assert ctl.pending()[1] == ["s2"]
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert ctl.pending() == ([], [])
    assert set(ctl.workloads) == {"s1"}


async def test_two_runs_share_one_controller() -> None:
    ctl = controller(pods=2)
    a, _ = slots_with_hook(ctl)
    b, _ = slots_with_hook(ctl)
    ta = asyncio.create_task(a.acquire("a1"))
    tb = asyncio.create_task(b.acquire("b1"))
    await asyncio.sleep(0)
    ctl.settle()
    pa, pb = await asyncio.wait_for(asyncio.gather(ta, tb), 1)
    assert not a.release(pb)  # a permit of the other run's slots
    a.release(pa)
    b.release(pb)
    assert ctl.workloads == {}


async def test_a_request_that_can_never_fit_is_refused() -> None:
    ctl = controller(pods=1)
    slots = AdmissionSlots(ctl, queue="q", requests={"pods": 2}, drive=False)
    with pytest.raises(AdmissionRefused, match="ExceedsMaxQuota"):
        await slots.acquire("s1")
    assert ctl.workloads == {}


async def test_the_capacity_surface_counts_reserved_and_in_use_apart() -> None:
    ctl = controller(pods=2)
    slots, _ = slots_with_hook(ctl)
    assert slots.total is None  # quotas, not a count
    first = slots.acquire_nowait("s1")  # one settle admits it at once
    waiting = asyncio.create_task(slots.acquire("s2"))
    await asyncio.sleep(0)
    ctl.settle()
    second = await waiting
    slots.mark_used(second)
    stats = slots.statistics()
    assert (stats.reserved, stats.in_use, stats.tasks_waiting, dict(stats.borrowers)) == (1, 1, 0, {"s1": 1, "s2": 1})
    assert repr(slots) == "<AdmissionSlots 'q' 2 admitted (1 reserved, 1 in use), 0 waiting, 2 submitted>"
    with pytest.raises(CapacityFull):
        slots.acquire_nowait("s3")  # no quota left: refused, and its Workload withdrawn
    assert "s3" not in ctl.workloads
    ctl.submit(Workload(name="hi", queue="q", priority=5))
    ctl.settle()  # preempts one of them: it no longer counts
    assert slots.statistics().borrowed_tokens == 1
    slots.release(first)
    slots.release(second)
    assert ctl.workloads == {"hi": ctl.workloads["hi"]} and slots.statistics().borrowed_tokens == 0
