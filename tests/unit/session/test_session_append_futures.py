"""The stores' appends are plain methods: the append is queued when it is asked for and the caller
awaits a future (no coroutine or task per append), with what an ``async def`` gave: a bad append or
a store that is not open fails the future, not the call, and a future nobody awaited still lands."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet.errors import StoreError
from agent_fleet.session import SessionLog, open_store


@pytest.fixture
def store(store_url: str) -> str:
    if not store_url.startswith(("sqlite:", "postgres")):
        pytest.skip("the in-memory log's appends are coroutines")
    return store_url


async def test_an_append_is_queued_when_asked_for(store: str) -> None:
    log: SessionLog = open_store(store)
    await log.open()
    one = log.emit_event("run-f.s1", "session_created", {"run_id": "run-f"})
    many = log.emit_events("run-f.s1", [("note", {"i": 1}), ("note", {"i": 2})])
    assert isinstance(one, asyncio.Future) and isinstance(many, asyncio.Future)
    await log.close()  # commits and acknowledges everything asked for before it, awaited or not
    assert one.done() and many.done()
    assert one.result().seq == 1
    assert [e.seq for e in many.result()] == [2, 3]
    async with open_store(store) as again:
        assert [e.type for e in await again.get_events("run-f.s1")] == ["session_created", "note", "note"]


async def test_a_bad_append_fails_its_future_not_the_call(store: str) -> None:
    async with open_store(store) as log:
        empty_id = log.emit_event("", "x")
        not_json = log.emit_event("s", "x", {"bad": object()})
        bad_item = log.emit_events("s", [("fine", {}), ("", {})])
        for future in (empty_id, not_json, bad_item):
            with pytest.raises(StoreError):
                await future
        assert await log.emit_events("s", []) == []
        assert await log.get_session("s") is None
    closed = log.emit_event("s", "x")
    with pytest.raises(StoreError, match="closed"):
        await closed
    assert await log.emit_events("s", []) == []  # nothing to write: no store needed, as before
