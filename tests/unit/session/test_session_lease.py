"""One owner per run: the lease decision, the stores' compare-and-swap, fencing, takeover in time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.errors import LeaseLost, RunOwned
from agent_fleet.session import SessionLog
from agent_fleet.session.lease import Lease, LeaseKeeper, LeaseOwner, attempt_fence, bump_attempt_fence, claim
from agent_fleet.session.memory import MemorySessionLog, MemoryStore

OpenLog = Callable[[], Awaitable[SessionLog]]

A = LeaseOwner("host-a", 1001, 10.0)
B = LeaseOwner("host-b", 2002, 20.0)
RUN = "run-0000000000ab"


def _dead(pid: int) -> bool:
    return False


def _alive(pid: int) -> bool:
    return True


# -- the decision ---------------------------------------------------------------------------------


def test_a_free_run_is_taken_at_epoch_one() -> None:
    assert claim(None, A, run_id=RUN, now=100.0, ttl=30.0) == Lease(RUN, 1, A, 100.0, 130.0)


def test_a_live_lease_of_another_owner_is_not_taken() -> None:
    held = Lease(RUN, 3, B, 100.0, 130.0)
    assert claim(held, A, run_id=RUN, now=129.9, ttl=30.0, alive=_alive) is None


def test_an_expired_lease_is_taken_with_the_next_epoch() -> None:
    held = Lease(RUN, 3, B, 100.0, 130.0)
    assert claim(held, A, run_id=RUN, now=130.0, ttl=30.0, alive=_alive) == Lease(RUN, 4, A, 130.0, 160.0)


def test_a_dead_owner_on_this_host_is_taken_over_at_once() -> None:
    held = Lease(RUN, 3, LeaseOwner("host-a", 777, 5.0), 100.0, 130.0)
    assert claim(held, A, run_id=RUN, now=101.0, ttl=30.0, alive=_dead) == Lease(RUN, 4, A, 101.0, 131.0)
    # the same pid alive on this host, or a pid on another host (which this one cannot check): wait
    assert claim(held, A, run_id=RUN, now=101.0, ttl=30.0, alive=_alive) is None
    assert claim(Lease(RUN, 3, B, 100.0, 130.0), A, run_id=RUN, now=101.0, ttl=30.0, alive=_dead) is None


def test_the_owner_renews_under_its_epoch() -> None:
    held = Lease(RUN, 5, A, 100.0, 130.0)
    assert claim(held, A, run_id=RUN, now=110.0, ttl=30.0) == Lease(RUN, 5, A, 110.0, 140.0)


# -- every store: compare-and-swap and fencing -------------------------------------------------------


async def test_swap_is_a_compare_and_swap_on_the_epoch(open_log: OpenLog) -> None:
    log = await open_log()
    first = Lease(RUN, 1, A, 1.0, 31.0)
    assert await log.swap_lease(first, None)  # type: ignore[attr-defined]
    assert not await log.swap_lease(Lease(RUN, 1, B, 2.0, 32.0), None)  # type: ignore[attr-defined]
    assert not await log.swap_lease(Lease(RUN, 2, B, 2.0, 32.0), 7)  # type: ignore[attr-defined]
    assert await log.read_lease(RUN) == first  # type: ignore[attr-defined]
    assert await log.swap_lease(Lease(RUN, 2, B, 3.0, 33.0), 1)  # type: ignore[attr-defined]
    assert await log.read_lease(RUN) == Lease(RUN, 2, B, 3.0, 33.0)  # type: ignore[attr-defined]
    assert await log.read_lease("run-other") is None  # type: ignore[attr-defined]


async def test_two_claims_at_once_give_one_owner(open_log: OpenLog) -> None:
    logs = [await open_log() for _ in range(4)]
    owners = [LeaseOwner("host-x", 100 + i, float(i)) for i in range(4)]
    now = 1_000.0

    async def take(i: int) -> int | str:
        try:
            keeper = await LeaseKeeper.take(logs[i], RUN, owner=owners[i], wall=lambda: now, alive=_alive)  # type: ignore[arg-type]
        except RunOwned as exc:
            return str(exc)
        return keeper.lease.epoch

    outcomes = await asyncio.gather(*(take(i) for i in range(4)))
    assert sorted(o for o in outcomes if isinstance(o, int)) == [1]
    refusals = [o for o in outcomes if isinstance(o, str)]
    assert len(refusals) == 3
    winner = owners[outcomes.index(1)]
    assert all(f"is owned by pid {winner.pid} on host-x" in r for r in refusals)


async def test_a_stale_owner_cannot_append_after_a_takeover(open_log: OpenLog) -> None:
    old, new, other = await open_log(), await open_log(), await open_log()
    t = [1_000.0]
    stale = await LeaseKeeper.take(old, RUN, owner=A, ttl=30.0, wall=lambda: t[0])  # type: ignore[arg-type]
    await old.emit_event(f"{RUN}.s00000", "session_created", {"run_id": RUN})
    t[0] += 31.0  # A froze past its expiry
    fresh = await LeaseKeeper.take(new, RUN, owner=B, ttl=30.0, wall=lambda: t[0])  # type: ignore[arg-type]
    assert (stale.lease.epoch, fresh.lease.epoch) == (1, 2)

    async def stale_write() -> object:
        try:
            return await old.emit_event(f"{RUN}.s00000", "model_request", {"n": "stale"})
        except LeaseLost as exc:
            return exc

    # the stale write and a write of the same engine to a run it does not fence share one batch
    refused, unfenced = await asyncio.gather(stale_write(), old.emit_event("run-elsewhere", "run_created", {}))
    assert getattr(unfenced, "seq", None) == 1
    assert isinstance(refused, LeaseLost) and refused.exit_code == 5
    assert "taken over by another engine (lease epoch 2, this engine held 1)" in str(refused)
    with pytest.raises(LeaseLost):
        await old.emit_events(RUN, [("run_resumed", {})])
    await new.emit_event(f"{RUN}.s00000", "model_request", {"n": "fresh"})
    await other.emit_event(RUN, "budget_raised", {"tokens": 5})  # an unfenced writer (budget raise) still writes
    events = await other.get_events(f"{RUN}.s00000")
    assert [(e.seq, e.type, e.data.get("n")) for e in events] == [
        (1, "session_created", None),
        (2, "model_request", "fresh"),
    ]
    assert [e.type for e in await other.get_events(RUN)] == ["budget_raised"]
    assert not await stale.renew()
    assert stale.lost


async def test_a_given_back_lease_is_taken_at_once_and_keeps_counting(open_log: OpenLog) -> None:
    log = await open_log()
    first = await LeaseKeeper.take(log, RUN, owner=A, wall=lambda: 50.0, alive=_alive)  # type: ignore[arg-type]
    await first.release()
    second = await LeaseKeeper.take(log, RUN, owner=B, wall=lambda: 51.0, alive=_alive)  # type: ignore[arg-type]
    assert second.lease == Lease(RUN, 2, B, 51.0, 81.0)


# -- takeover in time (virtual clock) ------------------------------------------------------------------


async def test_a_frozen_owner_is_taken_over_exactly_at_expiry() -> None:
    clock = VirtualClock(start=0.0)
    store = MemoryStore()
    first, second = MemorySessionLog(store, wall_clock=clock.now), MemorySessionLog(store, wall_clock=clock.now)
    await first.open()
    await second.open()
    async with clock.auto_advance():
        owner = await LeaseKeeper.take(first, RUN, owner=A, ttl=30.0, clock=clock, wall=clock.now, alive=_alive)
        owner.start()
        await clock.sleep(25.0)  # heartbeats at 10 and 20: the lease now runs to 50
        await owner.stop()  # the owner freezes (SIGSTOP): no more heartbeats
        assert (await first.read_lease(RUN)) == Lease(RUN, 1, A, 20.0, 50.0)
        waiter = await LeaseKeeper.take(
            second, RUN, owner=B, ttl=30.0, clock=clock, wall=clock.now, alive=_alive, wait=True
        )
        assert clock.now() == 50.0
        assert waiter.lease == Lease(RUN, 2, B, 50.0, 80.0)
        with pytest.raises(LeaseLost):
            await first.emit_event(RUN, "run_resumed", {})
        assert not await owner.renew()


async def test_a_waiter_waits_while_the_owner_beats_and_takes_it_when_given_back() -> None:
    clock = VirtualClock(start=0.0)
    store = MemoryStore()
    first, second = MemorySessionLog(store, wall_clock=clock.now), MemorySessionLog(store, wall_clock=clock.now)
    await first.open()
    await second.open()
    async with clock.auto_advance():
        owner = await LeaseKeeper.take(first, RUN, owner=A, ttl=30.0, clock=clock, wall=clock.now, alive=_alive)
        owner.start()
        with pytest.raises(RunOwned, match=r"owned by pid 1001 on host-a .*use --wait"):
            await LeaseKeeper.take(second, RUN, owner=B, ttl=30.0, clock=clock, wall=clock.now, alive=_alive)

        async def give_back_at_99_5() -> None:
            await clock.sleep(99.5)
            await owner.release()

        async with asyncio.TaskGroup() as tg:
            tg.create_task(give_back_at_99_5())
            waiter = await LeaseKeeper.take(
                second, RUN, owner=B, ttl=30.0, clock=clock, wall=clock.now, alive=_alive, wait=True
            )
        assert waiter.lease == Lease(RUN, 2, B, 100.0, 130.0)  # the first poll after the release (1 s polls)


# -- attempt fences (attempts on other machines) ----------------------------------------------------


async def test_a_lost_attempt_cannot_append_after_the_session_moved_on(open_log: OpenLog) -> None:
    driver, node_a, node_b = await open_log(), await open_log(), await open_log()
    sid = f"{RUN}.s00001"
    await driver.emit_event(sid, "session_created", {"run_id": RUN})
    first = await bump_attempt_fence(driver, sid, A, now=1.0)  # type: ignore[arg-type]

    async def write_as(log: SessionLog, epoch: int, n: str) -> object:
        token = attempt_fence.set(epoch)
        try:
            return await log.emit_event(sid, "model_request", {"n": n})
        except LeaseLost as exc:
            return exc
        finally:
            attempt_fence.reset(token)

    assert getattr(await write_as(node_a, first, "a1"), "seq", None) == 2
    second = await bump_attempt_fence(driver, sid, B, now=2.0)  # node A declared lost: B takes the session
    assert (first, second) == (1, 2)
    zombie, fresh, unfenced = await asyncio.gather(
        write_as(node_a, first, "late"), write_as(node_b, second, "b1"), node_a.emit_event(f"{RUN}.s00002", "x", {})
    )
    assert isinstance(zombie, LeaseLost) and zombie.exit_code == 5
    assert "taken over by a newer attempt (attempt fence 2, this attempt held 1)" in str(zombie)
    assert getattr(fresh, "seq", None) == 3 and getattr(unfenced, "seq", None) == 1
    # an attempt given a fence that was never taken writes nothing either
    assert isinstance(await write_as(node_b, 7, "forged"), LeaseLost)
    events = await driver.get_events(sid)
    assert [(e.seq, e.data.get("n")) for e in events] == [(1, None), (2, "a1"), (3, "b1")]
