"""Worker pool and dispatcher overhead at fleet scale.

1. **Assignment**: leases per second on a pool of N single-slot workers kept 90 % busy (release one,
   assign one), with the pool's idle index, against the named baseline: the same least-loaded
   choice by a full scan of every worker's health (``least_loaded(pool._candidates(...))`` then the
   grant), which is what assignment cost before the index.
2. **Dispatch**: CPU per session when the dispatcher runs N sessions whose bodies end at once
   (admission slots, a lease, an attempt task, the health rounds), against the named baseline of
   a bare ``asyncio.Semaphore`` + one task per session doing the same no-op.

Run: ``python benchmarks/worker_pool.py [--workers 1000 10000] [--sessions 10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from decimal import Decimal
from typing import Any

from agent_fleet.brain.harness import Outcome, SessionOutcome
from agent_fleet.clock import RealClock
from agent_fleet.dispatch.health import HealthConfig
from agent_fleet.dispatch.pool import Lease, WorkerPool, WorkerSpec
from agent_fleet.dispatch.runner import Attempt, Dispatcher, DispatchOptions
from agent_fleet.dispatch.selection import least_loaded
from agent_fleet.dispatch.slots import LocalSlots
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage


def _pool(n: int) -> WorkerPool:
    pool = WorkerPool(RealClock(), health=HealthConfig(dead_after=1e9, hung_after=1e9))
    for i in range(n):
        pool.register(WorkerSpec(worker_id=f"w{i:06d}"))
    return pool


def _churn(pool: WorkerPool, cycles: int, acquire: Any) -> float:
    held: list[Lease] = []
    n = len(pool.workers())
    for s in range(int(n * 0.9)):  # filling is not measured
        lease = pool.acquire_nowait(f"fill{s}")
        assert lease is not None
        held.append(lease)
    start = time.process_time()
    for c in range(cycles):
        pool.release(held[c % len(held)], ok=True, latency=1.0)
        lease = acquire(pool, f"s{c}")
        assert lease is not None
        held[c % len(held)] = lease
    return time.process_time() - start


def _indexed(pool: WorkerPool, sid: str) -> Lease | None:
    return pool.acquire_nowait(sid)


def _full_scan(pool: WorkerPool, sid: str) -> Lease | None:
    pick = least_loaded(pool._candidates(None, (), ()))
    return None if pick is None else pool._grant(sid, pick.worker_id)


def assignment(workers: int, cycles: int) -> None:
    fast = _churn(_pool(workers), cycles, _indexed)
    slow_cycles = max(100, cycles * 100 // workers)  # the full scan is slow: fewer cycles, scaled
    slow = _churn(_pool(workers), slow_cycles, _full_scan) * cycles / slow_cycles
    print(
        f"assignment, {workers:>6} workers: idle index {cycles / fast:>10,.0f} leases/s, "
        f"full scan (baseline) {cycles / slow:>8,.0f} leases/s, ratio {slow / fast:,.0f}x"
    )


class _NullLog:
    async def emit_event(self, *a: Any, **k: Any) -> Any:
        return None


class _NullGateway:
    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        return ChatResponse("", usage=Usage())

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        return None

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        return Usage(), Decimal(0)


async def _done(attempt: Attempt) -> SessionOutcome:
    await asyncio.sleep(0)
    return SessionOutcome(attempt.session_id, Outcome.COMPLETED)


async def _dispatch(n: int) -> float:
    part = Partition(id="p", index=0, kind=InputKind.NONE, items=(), item_ids=(), est_tokens=0)
    d = Dispatcher(
        log=_NullLog(),  # type: ignore[arg-type]  # the no-op body writes nothing
        gateway=_NullGateway(),
        hands_for=lambda p: None,  # type: ignore[arg-type,return-value]
        slots=LocalSlots(n),
        options=DispatchOptions(check_interval=0.05),
        pool=_pool(n + n // 10),
        body=_done,
    )
    start = time.process_time()
    out = await d.run([(f"s{i}", part) for i in range(n)])
    took = time.process_time() - start
    assert len(out) == n and d.stats.completed == n
    return took


async def _bare(n: int) -> float:
    sem = asyncio.Semaphore(n)

    async def one() -> None:
        async with sem:
            await asyncio.sleep(0)

    start = time.process_time()
    async with asyncio.TaskGroup() as tg:
        for _ in range(n):
            tg.create_task(one())
    return time.process_time() - start


def dispatch(sessions: int) -> None:
    ours = asyncio.run(_dispatch(sessions))
    bare = asyncio.run(_bare(sessions))
    print(
        f"dispatch, {sessions:>6} sessions: {ours / sessions * 1e6:>6.1f} µs CPU/session, "
        f"bare semaphore+task (baseline) {bare / sessions * 1e6:>5.1f} µs, ratio {ours / bare:.1f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--cycles", type=int, default=20_000)
    ap.add_argument("--sessions", type=int, default=10_000)
    args = ap.parse_args()
    for n in args.workers:
        assignment(n, args.cycles)
    dispatch(args.sessions)


if __name__ == "__main__":
    main()
