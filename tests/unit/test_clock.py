"""The virtual clock: advancing on its own when every task waits, and timeouts on any clock."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet.clock import RealClock, VirtualClock, timeout


async def test_auto_advance_jumps_to_each_deadline_in_order() -> None:
    clock = VirtualClock(start=100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(sleeper("b", 2.5))
        tg.create_task(sleeper("a", 1.0))
        tg.create_task(sleeper("c", 2.5))
    assert woke == [("a", 101.0), ("b", 102.5), ("c", 102.5)]
    assert clock.now() == 102.5


async def test_auto_advance_waits_while_any_task_can_run() -> None:
    """A task that keeps working without sleeping holds the clock still."""
    clock = VirtualClock()
    seen: list[float] = []

    async def busy() -> None:
        for _ in range(200):
            seen.append(clock.now())
            await asyncio.sleep(0)

    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(clock.sleep(5.0))
        tg.create_task(busy())
    assert set(seen) == {0.0}
    assert clock.now() == 5.0


async def test_auto_advance_counts_a_task_waiting_on_an_event_as_blocked() -> None:
    clock = VirtualClock()
    ready = asyncio.Event()
    at: list[float] = []

    async def setter() -> None:
        await clock.sleep(3.0)
        ready.set()

    async def waiter() -> None:
        await ready.wait()
        at.append(clock.now())

    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(waiter())
        tg.create_task(setter())
    assert at == [3.0]


async def test_auto_advance_is_not_reentrant() -> None:
    clock = VirtualClock()
    async with clock.auto_advance():
        with pytest.raises(RuntimeError):
            async with clock.auto_advance():
                pass


async def test_timeout_fires_at_the_exact_virtual_time() -> None:
    clock = VirtualClock()
    async with clock.auto_advance():
        with pytest.raises(TimeoutError):
            async with timeout(clock, 7.5) as t:
                await clock.sleep(60.0)
        assert t.expired and clock.now() == 7.5
        async with timeout(clock, 7.5) as t:  # finishes in time: nothing fires
            await clock.sleep(7.0)
        assert not t.expired and clock.now() == 14.5
        await clock.sleep(10.0)  # the watch is gone: no late cancellation
        assert clock.now() == 24.5


async def test_timeout_none_never_fires_and_outer_cancellation_stays_a_cancellation() -> None:
    clock = VirtualClock()
    async with clock.auto_advance():
        async with timeout(clock, None):
            await clock.sleep(1000.0)
        assert clock.now() == 1000.0

        async def bounded() -> None:
            async with timeout(clock, 50.0):
                await clock.sleep(100.0)

        task = asyncio.create_task(bounded())
        await clock.sleep(10.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert clock.now() == 1010.0


async def test_timeout_on_the_real_clock() -> None:
    with pytest.raises(TimeoutError):
        async with timeout(RealClock(), 0.01):
            await asyncio.sleep(5)
    async with timeout(RealClock(), 5):
        await asyncio.sleep(0)


async def test_until_idle_returns_while_the_clock_advances_on_its_own() -> None:
    """Two tasks waiting for idleness do not keep each other busy."""
    clock = VirtualClock()
    gate = asyncio.Event()
    async with clock.auto_advance():
        waiter = asyncio.create_task(gate.wait())
        sleeper = asyncio.create_task(clock.sleep(4.0))
        async with asyncio.timeout(5):  # real seconds: only a deadlock would take this long
            await clock.until_idle()
            await sleeper
        assert clock.now() == 4.0 and not waiter.done()
        gate.set()
        await waiter


async def test_until_idle_waits_for_work_in_progress() -> None:
    clock = VirtualClock()
    steps: list[int] = []

    async def work() -> None:
        for i in range(50):
            steps.append(i)
            await asyncio.sleep(0)

    task = asyncio.create_task(work())
    await clock.until_idle()
    assert steps == list(range(50)) and task.done() and clock.now() == 0.0
