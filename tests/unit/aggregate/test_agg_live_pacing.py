"""Live deduplication yields to the sessions: it rests in proportion to each batch's time, with a
small share when the engine is busy and a large one when it waits on the provider (virtual clock,
exact values)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_fleet.aggregate import Aggregator
from agent_fleet.aggregate.embedders import LexicalEmbedder
from agent_fleet.aggregate.live import DedupPacing, LiveDedup
from agent_fleet.clock import VirtualClock
from agent_fleet.domain.results import ResultItem


def item(n: int) -> ResultItem:
    return ResultItem(
        id=f"r{n:04d}",
        partition_id="p00001",
        session_id="run.s00001",
        title=f"finding {n}",
        body=f"body of finding {n}",
    )


def test_rest_is_proportional_to_the_batch_and_the_share() -> None:
    pacing = DedupPacing(idle_share=0.5, busy_share=0.05, busy_above=0.5)
    assert pacing.rest_after(0.2, engine_cpu_share=0.1) == pytest.approx(0.2)  # half of the time
    assert pacing.rest_after(0.2, engine_cpu_share=0.9) == pytest.approx(3.8)  # 5 % of the time
    assert pacing.rest_after(0.2, engine_cpu_share=0.5) == pytest.approx(0.2)  # at the line: idle
    assert pacing.rest_after(0.0, engine_cpu_share=0.9) == 0.0
    assert DedupPacing(idle_share=1.0).rest_after(5.0, 0.0) == 0.0


@pytest.mark.parametrize("bad", [{"idle_share": 0.0}, {"busy_share": 1.5}, {"max_batch": 0}])
def test_bad_pacing_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        DedupPacing(**bad)


class TimedAggregator(Aggregator):
    """Each batch takes ``per_item`` virtual seconds per result; the CPU clock follows a script."""

    def __init__(self, clock: VirtualClock, per_item: float) -> None:
        super().__init__(LexicalEmbedder())
        self.clock, self.per_item = clock, per_item
        self.batches: list[tuple[float, int]] = []  # (start, size)

    async def add_many(self, items: Any) -> Any:
        batch = list(items)
        self.batches.append((self.clock.now(), len(batch)))
        self.clock.advance(self.per_item * len(batch))
        return await super().add_many(batch)


async def run_until(clock: VirtualClock, cond: Any, limit: float = 100.0) -> None:
    for _ in range(10_000):
        if cond():
            return
        nxt = clock.next_deadline()
        if nxt is None or nxt > limit:
            await asyncio.sleep(0)
            continue
        clock.set(nxt)
        for _ in range(5):
            await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_a_busy_engine_gets_most_of_the_time_and_the_final_pass_gets_the_backlog() -> None:
    clock = VirtualClock()
    agg = TimedAggregator(clock, per_item=0.01)
    # the rest of the engine uses 90 % of a core throughout
    live = LiveDedup(agg, pacing=DedupPacing(max_batch=10), clock=clock, cpu_time=lambda: 0.9 * clock.now())
    consumer = asyncio.create_task(live.consume())
    live.feed([item(i) for i in range(25)])
    await run_until(clock, lambda: len(agg.batches) == 1)
    # first batch at t=0: 10 results, 0.1 s; nothing measured yet → idle share 0.5 → rest 0.1 s
    assert agg.batches == [(0.0, 10)]
    await run_until(clock, lambda: len(agg.batches) == 2)
    assert agg.batches[1] == (pytest.approx(0.2), 10)
    assert live.backlog == 5
    # 90 % of a core during that rest → busy; the second batch took 0.1 s: rest 0.1 × 0.95 / 0.05 = 1.9 s, until t = 2.2
    await clock.run_for(1.0 - clock.now())
    assert len(agg.batches) == 2
    live.finish()  # the sessions end during the rest: consume returns at once, backlog untouched
    await asyncio.wait_for(consumer, 1.0)
    assert clock.now() == pytest.approx(1.0)
    assert live.backlog == 5 and live.stats()["raw"] == 20
    # the final pass takes everything (the aggregator skips what it has already clustered)
    await agg.add_many([item(i) for i in range(25)])
    assert live.stats()["raw"] == 25


async def test_an_idle_engine_keeps_up() -> None:
    clock = VirtualClock()
    agg = TimedAggregator(clock, per_item=0.001)
    live = LiveDedup(agg, pacing=DedupPacing(max_batch=100), clock=clock, cpu_time=lambda: 0.0)
    consumer = asyncio.create_task(live.consume())
    for start in range(0, 300, 30):  # 30 results every second
        live.feed([item(i) for i in range(start, start + 30)])
        await run_until(clock, lambda: live.backlog == 0)
        clock.advance(1.0)
        for _ in range(5):
            await asyncio.sleep(0)
    live.finish()
    await asyncio.wait_for(consumer, 1.0)
    assert live.stats()["raw"] == 300 and live.backlog == 0
    assert [size for _, size in agg.batches] == [30] * 10
