"""The SessionLog contract, checked against every backend (see conftest: sqlite and postgres)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.errors import SessionNotFound, StoreError
from agent_fleet.session import SessionLog
from agent_fleet.session.port import WakeState

OpenLog = Callable[[], Awaitable[SessionLog]]


async def test_seq_starts_at_one_and_has_no_gaps(log: SessionLog) -> None:
    before = time.time()
    events = [await log.emit_event("s1", "tool_call", {"n": n}) for n in range(5)]
    after = time.time()
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert all(before <= e.time <= after for e in events)
    stored = await log.get_events("s1")
    assert stored == events
    assert [e.data for e in stored] == [{"n": n} for n in range(5)]
    other = await log.emit_event("s2", "tool_call")
    assert (other.seq, other.data) == (1, {})


async def test_event_data_round_trips_as_json(log: SessionLog) -> None:
    data = {"text": 'héllo ✓ "quoted"', "nested": {"list": [1, 2.5, None, True]}, "n": 10**15}
    event = await log.emit_event("s", "model_response", data)
    assert event.data == data
    assert (await log.get_events("s"))[0].data == data


async def test_returned_data_does_not_alias_the_callers_dict(log: SessionLog) -> None:
    data = {"k": "v"}
    event = await log.emit_event("s", "x", data)
    data["k"] = "changed"
    assert event.data == {"k": "v"}
    assert (await log.get_events("s"))[0].data == {"k": "v"}


async def test_nul_characters_are_stored_as_replacement_characters(log: SessionLog) -> None:
    # jsonb cannot hold NUL; every backend stores the same thing. A literal backslash-u0000 is text.
    event = await log.emit_event("s", "tool_result", {"output": "a\x00b", "literal": "\\u0000"})
    expected = {"output": "a\ufffdb", "literal": "\\u0000"}
    assert event.data == expected
    assert (await log.get_events("s"))[0].data == expected


async def test_emit_events_assigns_consecutive_seqs(log: SessionLog) -> None:
    await log.emit_event("s", "a")
    events = await log.emit_events("s", [("b", {"i": 1}), ("c", {"i": 2}), ("d", {})])
    assert [(e.seq, e.type, e.data) for e in events] == [(2, "b", {"i": 1}), (3, "c", {"i": 2}), (4, "d", {})]
    assert len({e.time for e in events}) == 1  # one transaction, one commit time
    assert await log.get_events("s") == [*(await log.get_events("s"))[:1], *events]


async def test_emit_events_with_nothing_creates_nothing(log: SessionLog) -> None:
    assert await log.emit_events("s", []) == []
    assert await log.get_session("s") is None


async def test_invalid_data_rejects_the_whole_call(log: SessionLog) -> None:
    with pytest.raises(StoreError, match="not JSON"):
        await log.emit_events("s", [("a", {"ok": 1}), ("b", {"bad": object()})])
    with pytest.raises(StoreError, match="not JSON"):
        await log.emit_event("s", "c", {"nan": float("nan")})
    with pytest.raises(StoreError, match="session id"):
        await log.emit_event("", "c")
    assert await log.get_events("s") == []
    assert await log.get_session("s") is None


async def test_a_request_that_fails_in_the_database_fails_alone_and_atomically(log: SessionLog) -> None:
    # A lone surrogate passes JSON encoding but cannot be written as UTF-8: it fails inside the
    # batch transaction. Its batch-mates must still commit, and none of its events may be stored.
    await log.emit_event("bad", "first")
    results = await asyncio.gather(
        *(log.emit_event(f"good{i}", "tool_call", {"i": i}) for i in range(20)),
        log.emit_events("bad", [("fine", {}), ("broken\ud800", {})]),
        *(log.emit_event(f"good{i}", "tool_call", {"i": i}) for i in range(20)),
        return_exceptions=True,
    )
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1
    assert isinstance(errors[0], StoreError)
    assert [e.type for e in await log.get_events("bad")] == ["first"]
    assert (await log.get_session("bad")).last_seq == 1  # type: ignore[union-attr]
    for i in range(20):
        assert [e.seq for e in await log.get_events(f"good{i}")] == [1, 2]
    assert (await log.emit_event("bad", "next")).seq == 2


async def test_run_stream_projection(log: SessionLog) -> None:
    created = await log.emit_event("run-1", EventType.RUN_CREATED, {"task": "find bugs", "input": "src"})
    record = await log.get_session("run-1")
    assert record is not None
    assert (record.kind, record.run_id, record.state, record.last_seq) == ("run", None, SessionState.CREATED, 1)
    assert record.info == {"task": "find bugs", "input": "src"}
    assert record.created_at == record.updated_at == created.time

    await log.emit_event("run-1", EventType.PLAN, {"plan": {"leaves": 3}})
    assert (await log.get_session("run-1")).state is SessionState.RUNNING  # type: ignore[union-attr]
    await log.emit_event("run-1", EventType.ALARM, {"kind": "cost"})  # no projection: unchanged
    record = await log.get_session("run-1")
    assert record is not None
    assert (record.state, record.last_seq) == (SessionState.RUNNING, 3)
    last = await log.emit_event("run-1", EventType.RUN_COMPLETED, {"summary": {}})
    record = await log.get_session("run-1")
    assert record is not None
    assert (record.state, record.last_seq, record.updated_at) == (SessionState.COMPLETED, 4, last.time)
    assert record.created_at == created.time
    assert record.info == {"task": "find bugs", "input": "src"}  # the creating event's data only


async def test_agent_session_projection_follows_the_last_state_change_of_a_batch(log: SessionLog) -> None:
    await log.emit_event("run-1.s00000", EventType.SESSION_CREATED, {"run_id": "run-1", "partition_id": "p0"})
    record = await log.get_session("run-1.s00000")
    assert record is not None
    assert (record.kind, record.run_id, record.state) == ("agent", "run-1", SessionState.CREATED)
    await log.emit_events(
        "run-1.s00000",
        [
            (EventType.SESSION_STARTED, {"attempt": 1}),
            (EventType.SESSION_RESUMED, {"attempt": 2}),
            (EventType.MODEL_REQUEST, {"turn": 1}),
            (EventType.SESSION_PAUSED, {"reason": "budget"}),
            (EventType.TOOL_CALL, {"call_id": "c1"}),
        ],
    )
    record = await log.get_session("run-1.s00000")
    assert record is not None
    assert (record.state, record.last_seq) == (SessionState.PAUSED, 6)
    await log.emit_event("run-1.s00000", EventType.BUDGET_RAISED, {"tokens": 1000})
    assert (await log.get_session("run-1.s00000")).state is SessionState.PAUSED  # type: ignore[union-attr]
    await log.emit_event("run-1.s00000", EventType.SESSION_RESUMED)
    assert (await log.get_session("run-1.s00000")).state is SessionState.RUNNING  # type: ignore[union-attr]


async def test_a_stream_not_opened_by_a_creating_event_is_an_agent_stream(log: SessionLog) -> None:
    await log.emit_event("loose", EventType.TOOL_CALL, {"run_id": "run-9"})
    record = await log.get_session("loose")
    assert record is not None
    assert (record.kind, record.run_id, record.state, record.info) == (
        "agent",
        "run-9",
        SessionState.CREATED,
        {"run_id": "run-9"},
    )
    await log.emit_event("loose2", EventType.SESSION_STARTED)
    assert (await log.get_session("loose2")).state is SessionState.RUNNING  # type: ignore[union-attr]


async def test_get_events_after(log: SessionLog) -> None:
    await log.emit_events("s", [(f"t{i}", {"i": i}) for i in range(10)])
    assert [e.seq for e in await log.get_events("s", after=7)] == [8, 9, 10]
    assert await log.get_events("s", after=10) == []
    assert await log.get_events("unknown") == []
    assert await log.get_session("unknown") is None


async def test_wake_returns_the_record_and_the_whole_history(log: SessionLog) -> None:
    await log.emit_event("run-1.s00001", EventType.SESSION_CREATED, {"run_id": "run-1"})
    await log.emit_events("run-1.s00001", [(EventType.SESSION_STARTED, {}), (EventType.MODEL_REQUEST, {"turn": 1})])
    state = await log.wake("run-1.s00001")
    assert state.session == await log.get_session("run-1.s00001")
    assert state.events == tuple(await log.get_events("run-1.s00001"))
    assert [e.seq for e in state.events] == [1, 2, 3]
    assert state.session.last_seq == state.events[-1].seq
    with pytest.raises(SessionNotFound, match="nope"):
        await log.wake("nope")


async def test_many_sessions_woken_at_once_each_get_their_own_history(log: SessionLog) -> None:
    sids = [f"run-1.s{i:05d}" for i in range(700)]  # more than one IN (...) list on SQLite
    for i, sid in enumerate(sids):
        await log.emit_events(sid, [(EventType.SESSION_CREATED, {"run_id": "run-1", "i": i})] * (1 + i % 3))
    asked = [*sids, "run-1.missing", sids[5]]  # a missing one, and one asked for twice
    states = await asyncio.gather(*(log.wake(sid) for sid in asked), return_exceptions=True)
    for i, (sid, state) in enumerate(zip(sids, states[:700], strict=True)):
        assert not isinstance(state, BaseException)
        assert state.session.session_id == sid
        assert [e.data["i"] for e in state.events] == [i] * (1 + i % 3)
        assert [e.seq for e in state.events] == list(range(1, 2 + i % 3))
    assert isinstance(states[700], SessionNotFound)
    assert states[701] == states[5]


async def test_list_runs_newest_first(log: SessionLog) -> None:
    for i in range(5):
        await log.emit_event(f"run-{i}", EventType.RUN_CREATED, {"task": f"t{i}"})
    await log.emit_event("run-0.s00000", EventType.SESSION_CREATED, {"run_id": "run-0"})
    runs = await log.list_runs()
    assert [r.session_id for r in runs] == ["run-4", "run-3", "run-2", "run-1", "run-0"]
    assert [r.info["task"] for r in runs] == ["t4", "t3", "t2", "t1", "t0"]
    assert [r.session_id for r in await log.list_runs(limit=2)] == ["run-4", "run-3"]


async def _populate_two_runs(log: SessionLog) -> None:
    indexes = list(range(6))
    random.Random(7).shuffle(indexes)
    for run in ("run-a", "run-b"):
        await log.emit_event(run, EventType.RUN_CREATED, {"task": run})
    for i in indexes:
        for run in ("run-a", "run-b"):
            sid = f"{run}.s{i:05d}"
            await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": run, "index": i})
    # Interleave the sessions' later events so storage order differs from session order.
    for turn in range(3):
        for i in reversed(indexes):
            await log.emit_event(f"run-a.s{i:05d}", EventType.RESULT_ITEM if turn == 1 else "tool_call", {"t": turn})


async def test_list_sessions_in_session_id_order(log: SessionLog) -> None:
    await _populate_two_runs(log)
    sessions = await log.list_sessions("run-a")
    assert [s.session_id for s in sessions] == [f"run-a.s{i:05d}" for i in range(6)]
    assert all(s.kind == "agent" and s.run_id == "run-a" for s in sessions)
    assert [s.last_seq for s in sessions] == [4] * 6
    assert await log.list_sessions("run-zzz") == []


async def test_events_of_run_by_session_then_seq(log: SessionLog) -> None:
    await _populate_two_runs(log)
    events = await log.events_of_run("run-a")
    expected = [(f"run-a.s{i:05d}", seq) for i in range(6) for seq in range(1, 5)]
    assert [(e.session_id, e.seq) for e in events] == expected
    assert events == [e for i in range(6) for e in await log.get_events(f"run-a.s{i:05d}")]

    results = await log.events_of_run("run-a", types=[EventType.RESULT_ITEM])
    assert [(e.session_id, e.seq, e.type) for e in results] == [
        (f"run-a.s{i:05d}", 3, EventType.RESULT_ITEM) for i in range(6)
    ]
    two_types = await log.events_of_run("run-a", types=[EventType.RESULT_ITEM, EventType.SESSION_CREATED])
    assert [(e.session_id, e.seq) for e in two_types] == [(f"run-a.s{i:05d}", s) for i in range(6) for s in (1, 3)]
    assert await log.events_of_run("run-a", types=[]) == []
    assert [e.session_id for e in await log.events_of_run("run-b")] == [f"run-b.s{i:05d}" for i in range(6)]
    assert await log.events_of_run("run-zzz") == []


async def test_snapshots_replace_and_read_back(log: SessionLog) -> None:
    assert await log.get_snapshot("admission") is None
    await log.put_snapshot("admission", {"queues": {"team-a": {"admitted": 3}}})
    assert await log.get_snapshot("admission") == {"queues": {"team-a": {"admitted": 3}}}
    await log.put_snapshot("admission", {"queues": {}})
    assert await log.get_snapshot("admission") == {"queues": {}}
    assert await log.get_snapshot("other") is None


async def test_concurrent_emitters_to_one_session_get_unique_gap_free_seqs(log: SessionLog) -> None:
    async def emitter(k: int) -> list[Event]:
        out = []
        for i in range(20):
            if i % 5 == 0:
                out += await log.emit_events("shared", [("x", {"k": k, "i": i}), ("y", {"k": k, "i": i})])
            else:
                out.append(await log.emit_event("shared", "x", {"k": k, "i": i}))
        return out

    acknowledged = [e for batch in await asyncio.gather(*(emitter(k) for k in range(25))) for e in batch]
    assert sorted(e.seq for e in acknowledged) == list(range(1, 25 * 24 + 1))
    stored = await log.get_events("shared")
    assert sorted(stored, key=lambda e: e.seq) == sorted(acknowledged, key=lambda e: e.seq)
    # Each emitter's own events stay in the order it emitted them.
    for k in range(25):
        mine = [e.data["i"] for e in stored if e.data["k"] == k]
        assert mine == sorted(mine)
    assert (await log.get_session("shared")).last_seq == 25 * 24  # type: ignore[union-attr]


async def test_two_logs_on_one_store_share_the_sequence(open_log: OpenLog) -> None:
    first, second = await open_log(), await open_log()
    await first.emit_events("s", [("a", {}), ("b", {})])
    assert (await second.emit_event("s", "c")).seq == 3  # second process, same store
    assert (await first.emit_event("s", "d")).seq == 4  # first must not trust a stale counter
    await asyncio.gather(
        *(log.emit_event("s", "e", {"i": i}) for i in range(30) for log in (first, second)),
    )
    assert [e.seq for e in await second.get_events("s")] == list(range(1, 65))
    assert (await first.get_session("s")).last_seq == 64  # type: ignore[union-attr]


async def test_two_logs_creating_one_session_at_once_share_it(open_log: OpenLog) -> None:
    first, second = await open_log(), await open_log()
    for round_ in range(5):  # each log looks the session up before either has written it
        sid = f"run-2.s{round_:05d}"
        made = await asyncio.gather(
            first.emit_event(sid, EventType.SESSION_CREATED, {"run_id": "run-2", "by": "first"}),
            second.emit_event(sid, EventType.SESSION_CREATED, {"run_id": "run-2", "by": "second"}),
            first.emit_event(sid, EventType.SESSION_STARTED),
        )
        assert sorted(e.seq for e in made) == [1, 2, 3]
        stored = await second.get_events(sid)
        rec = await first.get_session(sid)
        assert rec is not None and rec.last_seq == 3
        assert rec.info == stored[0].data  # the creating event is the one that got seq 1
        assert rec.state == (
            SessionState.RUNNING if stored[-1].type == EventType.SESSION_STARTED else SessionState.CREATED
        )
    assert len(await first.list_sessions("run-2")) == 5


async def test_events_survive_close_and_reopen(open_log: OpenLog) -> None:
    first = await open_log()
    await first.emit_event("run-1", EventType.RUN_CREATED, {"task": "t"})
    await first.put_snapshot("k", {"v": 1})
    await first.close()
    second = await open_log()
    assert [e.type for e in await second.get_events("run-1")] == ["run_created"]
    assert (await second.emit_event("run-1", EventType.PLAN)).seq == 2
    assert await second.get_snapshot("k") == {"v": 1}


async def test_close_acknowledges_everything_queued_before_it(log: SessionLog) -> None:
    async def emit(i: int) -> Event:
        return await log.emit_event(f"s{i % 7}", "x", {"i": i})

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(emit(i)) for i in range(200)]
        await asyncio.sleep(0)  # every emitter has queued its request
        await log.close()
    assert sorted(t.result().data["i"] for t in tasks) == list(range(200))
    await log.close()  # a second close is a no-op
    with pytest.raises(StoreError, match="closed"):
        await log.emit_event("s0", "x")
    with pytest.raises(StoreError, match="closed"):
        await log.get_events("s0")


async def test_open_is_idempotent(log: SessionLog) -> None:
    await log.open()
    assert (await log.emit_event("s", "x")).seq == 1


async def test_a_burst_of_wakes_is_read_in_one_go(log: SessionLog) -> None:
    sids = [f"run-2.s{i:05d}" for i in range(50)]
    for n, sid in enumerate(sids):
        await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": "run-2", "n": n})
        await log.emit_events(sid, [("model_request", {"turn": 1}), ("model_response", {"turn": 1, "n": n})])
    batcher = log._wakes  # type: ignore[attr-defined]
    real = batcher._read_many
    reads: list[list[str]] = []

    async def counted(ids: Any) -> Any:
        reads.append(list(ids))
        return await real(ids)

    batcher._read_many = counted
    asked = [*sids, "run-2.s99999"]  # one that does not exist
    states = await asyncio.gather(*(log.wake(sid) for sid in asked), return_exceptions=True)
    assert reads == [asked]  # fifty-one wakes asked for in one turn: one read, one snapshot
    assert isinstance(states[-1], SessionNotFound)
    for n, (sid, state) in enumerate(zip(sids, states[:-1], strict=True)):
        assert isinstance(state, WakeState) and state.session.session_id == sid
        assert [(e.type, e.seq) for e in state.events] == [
            ("session_created", 1),
            ("model_request", 2),
            ("model_response", 3),
        ]
        assert state.events[0].data["n"] == n and state.events[2].data["n"] == n
    # a later burst gets a read of its own
    again = await asyncio.gather(log.wake(sids[0]), log.wake(sids[1]))
    assert [w.session.session_id for w in again] == sids[:2] and reads[-1] == sids[:2]
