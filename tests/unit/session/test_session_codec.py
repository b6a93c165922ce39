"""The pure rules both backends share: JSON text and how a batch becomes rows and projections."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import uuid
from typing import Any

import pytest

from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.errors import StoreError
from agent_fleet.session._codec import AppendRequest, decode_data, encode_data, make_event, plan_appends


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


class _Mood(enum.Enum):
    CALM = "calm"


class _Kind(enum.StrEnum):
    TOOL = "tool"


def _json_text(data: dict[Any, Any]) -> str:
    """What the log stored before it used orjson: json's compact text, refusing NaN."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def test_the_stored_text_is_jsons_byte_for_byte() -> None:
    chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]  # NUL: see above
    texts = ["".join(chars[i : i + 700]) for i in range(0, len(chars), 700)]
    flat: list[dict[Any, Any]] = [{t[:9]: t, "n": i, "b": i % 2 == 0, "none": None} for i, t in enumerate(texts)]
    flat += [{"big": 2**63}, {"small": -(2**63)}, {"wide": 2**64}, {"wider": -(2**70)}, {}, {"": ""}, {"t": True}]
    other: list[dict[Any, Any]] = [
        {"f": 1e-05, "g": 2.5e-07, "h": 1e16, "z": -0.0, "third": 1 / 3},  # json and orjson spell floats apart
        {2: "int key", True: "bool key", None: "none key", 1.5: "float key"},
        {_Kind.TOOL: _Kind.TOOL, "nested": {"list": [1, "two", None, [3.0]]}, "tuple": (1, 2)},
        {"response": {"content": None, "tool_calls": [{"id": "c1", "arguments": '{"a": 1}'}]}},
    ]
    for data in flat + other:
        assert encode_data(data)[1] == _json_text(data)


def test_what_json_refused_is_refused() -> None:
    for bad in (
        {"enum": _Mood.CALM},
        {"uuid": uuid.UUID(int=7)},
        {"when": datetime.datetime(2025, 1, 1)},
        {"nan": float("nan")},
        {"bytes": b"x"},
        {"record": SessionRecordLike(1)},
    ):
        with pytest.raises(TypeError if "nan" not in bad else ValueError):
            _json_text(bad)
        with pytest.raises(StoreError, match="not JSON"):
            encode_data(bad)


@dataclasses.dataclass
class SessionRecordLike:
    n: int


def test_decode_data_always_gives_a_dict() -> None:
    assert decode_data('{"a":1}') == {"a": 1}
    assert decode_data("") == {}
    assert decode_data(None) == {}
    assert decode_data("[1]") == {"value": [1]}


def _request(session_id: str, *types: str, data: dict[str, Any] | None = None) -> AppendRequest:
    future: asyncio.Future[list[Event]] = asyncio.get_running_loop().create_future()
    items = [(t, *encode_data(data)) for t in types]
    return AppendRequest(session_id, items, future)


async def test_plan_appends_creates_new_sessions_and_moves_only_changed_states() -> None:
    requests = [
        _request("run-1.s00002", EventType.SESSION_CREATED, data={"run_id": "run-1"}),
        _request("run-1", EventType.RUN_CREATED, EventType.PLAN),
        _request("run-1.s00001", EventType.TOOL_CALL),
        _request("run-1.s00002", EventType.SESSION_STARTED, EventType.MODEL_REQUEST),
        _request("run-1.s00003", EventType.TOOL_RESULT),
        _request("run-1.s00004", EventType.SESSION_COMPLETED, EventType.TOOL_RESULT),
    ]
    plan = plan_appends(requests, {"run-1.s00003": 7, "run-1.s00004": 3}, 12.5)
    assert list(plan.created) == ["run-1.s00002", "run-1", "run-1.s00001"]  # in the order they first appear
    agent, run, loose = plan.created.values()
    assert (run.kind, run.run_id, run.state, run.created_state) == (
        "run",
        None,
        SessionState.RUNNING,
        SessionState.RUNNING,
    )
    assert (loose.kind, loose.run_id, loose.state, loose.created_state) == ("agent", None, None, SessionState.CREATED)
    assert (agent.kind, agent.run_id, agent.created_state, agent.first_data) == (
        "agent",
        "run-1",
        SessionState.RUNNING,
        {"run_id": "run-1"},
    )
    assert plan.moved == {"run-1.s00004": SessionState.COMPLETED}  # s00003 existed and kept its state
    assert plan.last == {"run-1.s00002": 3, "run-1": 2, "run-1.s00001": 1, "run-1.s00003": 8, "run-1.s00004": 5}


async def test_plan_appends_numbers_each_session_from_its_base_in_queue_order() -> None:
    requests = [_request("a", "x", "y"), _request("b", "x"), _request("a", "z")]
    base = {"a": 5}
    plan = plan_appends(requests, base, 12.5)
    assert [(r[0], r[1], r[2], r[3]) for r in plan.rows] == [
        ("a", 6, "x", 12.5),
        ("a", 7, "y", 12.5),
        ("b", 1, "x", 12.5),
        ("a", 8, "z", 12.5),
    ]
    assert base == {"a": 5}  # only read
    assert plan.last == {"a": 8, "b": 1}
    assert [[(e.session_id, e.seq, e.time) for e in events] for _, events in plan.acks] == [  # type: ignore[union-attr]
        [("a", 6, 12.5), ("a", 7, 12.5)],
        [("b", 1, 12.5)],
        [("a", 8, 12.5)],
    ]
    assert [future for future, _ in plan.acks] == [request.future for request in requests]


async def test_plan_appends_acknowledges_a_single_append_with_its_event() -> None:
    future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
    request = AppendRequest("a", [("x", *encode_data({"k": 1}))], future, single=True)
    plan = plan_appends([request], {"a": 2}, 1.0)
    assert plan.acks == [(future, Event("a", 3, "x", 1.0, {"k": 1}))]


def test_make_event_builds_the_same_frozen_event_as_the_constructor() -> None:
    data = {"k": [1, 2]}
    made = make_event("run-1.s00001", 7, "tool_result", 12.5, data)
    assert type(made) is Event
    assert made == Event("run-1.s00001", 7, "tool_result", 12.5, data)
    assert (made.session_id, made.seq, made.type, made.time) == ("run-1.s00001", 7, "tool_result", 12.5)
    assert made.data is data
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.seq = 8  # type: ignore[misc]


def test_the_writers_state_table_is_project_state() -> None:
    from agent_fleet.domain import events
    from agent_fleet.session._codec import _STATE_OF

    for name in [*EventType, "not_an_event_type", ""]:
        assert _STATE_OF.get(name) == events.project_state(name)
    assert set(_STATE_OF) == set(events._TRANSITIONS)  # every rule of the domain is in the table
