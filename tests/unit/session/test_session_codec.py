"""The pure rules both backends share: JSON text and how a batch becomes rows and projections."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.errors import StoreError
from agent_fleet.session._codec import AppendRequest, assign, decode_data, encode_data, make_event, plan_batch


def test_encode_data_is_compact_json_and_a_copy() -> None:
    data = {"a": [1, 2.5, None], "é": "ü"}
    value, text = encode_data(data)
    assert text == '{"a":[1,2.5,null],"é":"ü"}'
    assert value == data and value is not data
    assert encode_data(None) == ({}, "{}")


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("a\x00b", "a\ufffdb"),
        ("\\u0000", "\\u0000"),  # a backslash followed by u0000 is text, not NUL
        ("\\\x00", "\\\ufffd"),  # a backslash, then a real NUL
        ("\x00\x00", "\ufffd\ufffd"),
    ],
)
def test_nul_becomes_the_replacement_character(raw: str, stored: str) -> None:
    value, text = encode_data({"s": raw})
    assert value == {"s": stored}
    assert json.loads(text) == {"s": stored}


def test_values_that_are_not_json_are_rejected() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for bad in ({"x": object()}, {"x": float("inf")}, {"x": cyclic}, {1j: 1}):
        with pytest.raises(StoreError, match="not JSON"):
            encode_data(bad)  # type: ignore[arg-type]


def test_decode_data_always_gives_a_dict() -> None:
    assert decode_data('{"a":1}') == {"a": 1}
    assert decode_data("") == {}
    assert decode_data(None) == {}
    assert decode_data("[1]") == {"value": [1]}


def _request(session_id: str, *types: str, data: dict[str, Any] | None = None) -> AppendRequest:
    future: asyncio.Future[list[Event]] = asyncio.get_running_loop().create_future()
    items = [(t, *encode_data(data)) for t in types]
    return AppendRequest(session_id, items, future)


async def test_plan_batch_groups_by_session_in_id_order() -> None:
    requests = [
        _request("run-1.s00002", EventType.SESSION_CREATED, data={"run_id": "run-1"}),
        _request("run-1", EventType.RUN_CREATED, EventType.PLAN),
        _request("run-1.s00001", EventType.TOOL_CALL),
        _request("run-1.s00002", EventType.SESSION_STARTED, EventType.MODEL_REQUEST),
    ]
    deltas = plan_batch(requests)
    assert list(deltas) == ["run-1", "run-1.s00001", "run-1.s00002"]
    run, loose, agent = deltas.values()
    assert (run.count, run.kind, run.run_id, run.state, run.created_state) == (
        2,
        "run",
        None,
        SessionState.RUNNING,
        SessionState.RUNNING,
    )
    assert (loose.count, loose.kind, loose.run_id, loose.state, loose.created_state) == (
        1,
        "agent",
        None,
        None,
        SessionState.CREATED,
    )
    assert (agent.count, agent.kind, agent.run_id, agent.state, agent.first_data) == (
        3,
        "agent",
        "run-1",
        SessionState.RUNNING,
        {"run_id": "run-1"},
    )


async def test_assign_numbers_each_session_from_its_base_in_queue_order() -> None:
    requests = [_request("a", "x", "y"), _request("b", "x"), _request("a", "z")]
    base = {"a": 5, "b": 0}
    rows, acks = assign(requests, base, 12.5)
    assert [(r[0], r[1], r[2]) for r in rows] == [("a", 6, "x"), ("a", 7, "y"), ("b", 1, "x"), ("a", 8, "z")]
    assert base == {"a": 8, "b": 1}
    assert [[(e.session_id, e.seq, e.time) for e in events] for _, events in acks] == [  # type: ignore[union-attr]
        [("a", 6, 12.5), ("a", 7, 12.5)],
        [("b", 1, 12.5)],
        [("a", 8, 12.5)],
    ]
    assert [future for future, _ in acks] == [request.future for request in requests]


def test_make_event_builds_the_same_frozen_event_as_the_constructor() -> None:
    data = {"k": [1, 2]}
    made = make_event("run-1.s00001", 7, "tool_result", 12.5, data)
    assert type(made) is Event
    assert made == Event("run-1.s00001", 7, "tool_result", 12.5, data)
    assert (made.session_id, made.seq, made.type, made.time) == ("run-1.s00001", 7, "tool_result", 12.5)
    assert made.data is data
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.seq = 8  # type: ignore[misc]
