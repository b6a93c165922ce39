from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from agent_fleet.capacity import CapacityFull
from agent_fleet.clock import VirtualClock
from agent_fleet.dispatch.health import BreakerState, HealthConfig
from agent_fleet.dispatch.pool import Lease, WorkerPool, WorkerSpec


def take(pool: WorkerPool, session_id: str, **criteria: Any) -> Lease | None:
    """A lease now, or None when no worker is free."""
    try:
        return pool.acquire_nowait(session_id, **criteria)
    except CapacityFull:
        return None


def pool_with(*specs: WorkerSpec, **health: float) -> tuple[VirtualClock, WorkerPool]:
    clock = VirtualClock()
    pool = WorkerPool(clock, health=HealthConfig(**health))  # type: ignore[arg-type]
    for s in specs:
        pool.register(s)
    return clock, pool


def test_least_loaded_assignment_and_release() -> None:
    _, pool = pool_with(WorkerSpec(worker_id="a", max_load=2), WorkerSpec(worker_id="b", max_load=2))
    leases = [take(pool, f"s{i}") for i in range(5)]
    assert [lease.worker_id if lease else None for lease in leases] == ["a", "b", "a", "b", None]
    assert pool.free_slots() == 0
    first = leases[0]
    assert first is not None and first.attempt == 1
    assert pool.release(first, ok=True, latency=2.0)
    assert not pool.release(first, ok=True)  # twice: stale
    assert pool.load("a") == 1 and pool.free_slots() == 1


def test_model_and_tool_constraints() -> None:
    _, pool = pool_with(
        WorkerSpec(worker_id="a", models=frozenset({"fast"}), tools=frozenset({"fetch_url"})),
        WorkerSpec(worker_id="b", models=frozenset({"deep"})),
    )
    got = take(pool, "s1", model="deep")
    assert got is not None and got.worker_id == "b"
    assert take(pool, "s2", model="deep") is None
    got = take(pool, "s3", tools=["fetch_url"])
    assert got is not None and got.worker_id == "a"


def test_capability_weighted_when_skills_are_required() -> None:
    _, pool = pool_with(
        WorkerSpec(worker_id="novice", skills={"sec": 1}, max_load=4),
        WorkerSpec(worker_id="expert", skills={"sec": 5}, max_load=4),
    )
    picks = []
    for i in range(6):
        lease = take(pool, f"s{i}", required_skills=["sec"])
        assert lease is not None
        picks.append(lease.worker_id)
    # the expert takes work until it is 2 (load_slack) above the novice
    assert picks == ["expert", "expert", "expert", "novice", "expert", "novice"]


def test_failure_reassigns_to_backup_with_new_fencing_token() -> None:
    clock, pool = pool_with(WorkerSpec(worker_id="a"), WorkerSpec(worker_id="b"))
    lease = take(pool, "s1")
    assert lease is not None and lease.worker_id == "a"
    clock.advance(4.0)
    pool.heartbeat("a")
    pool.heartbeat("b")
    moved = pool.fail(lease, reason="timeout")
    assert moved is not None and moved.reason == "timeout"
    assert moved.lease == Lease("s1", "b", 2, False, 4.0)
    assert not pool.release(lease, ok=True)  # the old worker finishing late is ignored
    assert pool.fail(lease) is None
    assert pool.release(moved.lease, ok=True)
    assert pool.health.stats("a").failures == 1


def test_a_failing_session_moves_to_a_worker_it_has_not_failed_on_while_one_is_free() -> None:
    _, pool = pool_with(*(WorkerSpec(worker_id=w) for w in "abc"))
    first = take(pool, "s1")
    assert first is not None and first.worker_id == "a"
    second = pool.fail(first, reason="timeout", avoid={"a"})
    assert second is not None and second.lease is not None and second.lease.worker_id == "b"
    # without the history it would go back to "a", the first idle worker
    third = pool.fail(second.lease, reason="timeout", avoid={"a", "b"})
    assert third is not None and third.lease is not None and third.lease.worker_id == "c"
    # every worker tried: the history gives way, only the worker it just failed on is excluded
    fourth = pool.fail(third.lease, reason="timeout", avoid={"a", "b", "c"})
    assert fourth is not None and fourth.lease is not None and fourth.lease.worker_id == "a"


def test_dead_worker_sessions_move_and_late_result_is_dropped() -> None:
    clock, pool = pool_with(WorkerSpec(worker_id="a", max_load=2), WorkerSpec(worker_id="b", max_load=2))
    l1, l2 = take(pool, "s1"), take(pool, "s2")
    assert l1 is not None and l2 is not None and l1.worker_id == "a" and l2.worker_id == "b"
    for t in (1.0, 2.0, 2.9):
        clock.set(t)
        pool.heartbeat("b", progress=t)
    assert pool.check() == []  # a: last beat at 0, dead once 3 s have passed
    clock.set(3.0)
    pool.heartbeat("b", progress=3.0)
    moved = pool.check()
    assert [(m.session_id, m.from_worker, m.reason) for m in moved] == [("s1", "a", "dead")]
    assert moved[0].lease is not None and moved[0].lease.worker_id == "b" and moved[0].lease.attempt == 2
    assert not pool.release(l1, ok=True)
    assert pool.statistics().dead == 1


def test_hung_worker_is_detected_within_hung_after() -> None:
    clock, pool = pool_with(WorkerSpec(worker_id="a"), WorkerSpec(worker_id="b"), hung_after=5.0)
    lease = take(pool, "s1")
    assert lease is not None and lease.worker_id == "a"
    moved = []
    t = 0.0
    while not moved:
        t += 1.0
        clock.set(t)
        pool.heartbeat("a", progress=1)  # beats, but the marker never moves
        pool.heartbeat("b", progress=t)
        moved = pool.check()
    assert t == 6.0  # the marker first appeared at t=1; 5 s without a change after that
    assert moved[0].reason == "hung" and moved[0].lease is not None and moved[0].lease.worker_id == "b"


def test_breaker_probe_returns_worker_after_cooldown() -> None:
    clock, pool = pool_with(WorkerSpec(worker_id="a", max_load=4), cooldown=10.0)
    for i in range(3):
        lease = take(pool, f"s{i}")
        assert lease is not None
        moved = pool.fail(lease)
        assert moved is not None
        if i < 2:
            assert moved.lease is None  # no backup: the caller queues it
    assert pool.health.breaker("a") is BreakerState.OPEN
    assert take(pool, "s9") is None
    assert pool.statistics().degraded
    clock.set(10.0)
    pool.heartbeat("a")
    probe = take(pool, "s9")
    assert probe is not None and probe.probe
    assert take(pool, "s10") is None  # only one probe
    assert pool.release(probe, ok=True)
    assert pool.health.breaker("a") is BreakerState.CLOSED
    assert pool.free_slots() == 4


def test_empty_pool_degrades_instead_of_failing() -> None:
    _, pool = pool_with()
    assert take(pool, "s1") is None
    assert pool.free_slots() == 0
    assert pool.team(["x"]) is None


def test_team_formation_from_healthy_workers_only() -> None:
    clock, pool = pool_with(
        WorkerSpec(worker_id="full", skills={"py": 1, "sql": 1}),
        WorkerSpec(worker_id="py", skills={"py": 1}),
        WorkerSpec(worker_id="sql", skills={"sql": 1}),
    )
    assert pool.team(["py", "sql"]) == ("full",)
    clock.set(5.0)
    pool.heartbeat("py")
    pool.heartbeat("sql")
    assert pool.team(["py", "sql"]) == ("py", "sql")  # "full" is dead


def test_double_acquire_is_a_bug() -> None:
    _, pool = pool_with(WorkerSpec(worker_id="a", max_load=2))
    assert take(pool, "s1") is not None
    with pytest.raises(ValueError):
        take(pool, "s1")


def test_fault_injection_every_session_completes_exactly_once() -> None:
    """100 sessions on 20 workers: 2 crash (10 %), 1 hangs (5 %), 1 fails everything."""
    rng = random.Random(7)
    clock, pool = pool_with(
        *(WorkerSpec(worker_id=f"w{i:02d}", max_load=2) for i in range(20)),
        dead_after=3.0,
        hung_after=6.0,
        cooldown=1000.0,
    )
    crash_at = {"w00": 4.0, "w01": 9.0}
    hung = {"w02"}
    bad = {"w03"}
    queue = [f"s{i:03d}" for i in range(100)]
    active: dict[str, Lease] = {}
    accepted: Counter[str] = Counter()
    stale_dropped = 0
    after_open: list[str] = []
    orphaned: list[Lease] = []

    def place(lease: Lease | None, sid: str) -> None:
        if lease is None:
            queue.append(sid)
        else:
            active[sid] = lease

    t = 0.0
    while (queue or active) and t < 500:
        for wid in pool.workers():
            if wid in crash_at and t >= crash_at[wid]:
                continue
            pool.heartbeat(wid, progress=0 if wid in hung else t)
        for m in pool.check():
            orphaned.append(active.pop(m.session_id))
            place(m.lease, m.session_id)
        for sid, lease in sorted(active.items()):
            w = lease.worker_id
            if (w in crash_at and t >= crash_at[w]) or w in hung:
                continue
            if w in bad and t - lease.started_at >= 1.0:
                del active[sid]
                m = pool.fail(lease)
                assert m is not None
                place(m.lease, sid)
            elif w not in bad and t - lease.started_at >= 3.0 + rng.random():
                del active[sid]
                if pool.release(lease, ok=True):
                    accepted[sid] += 1
        while queue:
            sid = queue.pop(0)
            lease = take(pool, sid)
            if lease is None:
                queue.insert(0, sid)
                break
            if lease.worker_id in bad and pool.health.breaker(lease.worker_id) is not BreakerState.CLOSED:
                after_open.append(sid)
            active[sid] = lease
        t += 1.0
        clock.set(t)

    # the crashed and hung workers "finish" their old sessions late: every such result is dropped
    for lease in orphaned:
        if not pool.release(lease, ok=True):
            stale_dropped += 1
    assert sorted(accepted) == [f"s{i:03d}" for i in range(100)]
    assert set(accepted.values()) == {1}
    assert stale_dropped == len(orphaned) > 0
    assert pool.health.breaker("w03") is BreakerState.OPEN
    assert pool.health.stats("w03").consecutive_failures >= 3
    assert after_open == []
    assert pool.health.liveness("w00").value == "dead" and pool.health.liveness("w01").value == "dead"
    st = pool.statistics()
    # the hung worker kept taking sessions and hanging: its third hung session opened its breaker
    assert pool.health.breaker("w02") is BreakerState.OPEN
    assert st.admitting == 16 and st.open_breakers == 2 and st.load == 0
