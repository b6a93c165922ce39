"""Results worth keeping: the runaway guard compares calls by their meaning, and a result that is empty,
markup only, or sure beyond 1 goes back to the model as a tool error it can fix — never recorded, never
clamped — and the run's figures count the refusals."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.brain.harness import Harness, Outcome
from agent_fleet.brain.step import Limits
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.observe.summary import run_figures
from agent_fleet.session import SessionLog, open_store
from agent_fleet.spend.guards import RunawayGuard
from agent_fleet.testing.fakes import FakeGateway, FakeHands

SID = "run-r.s00000"


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    store = open_store(f"sqlite:///{tmp_path / 'fleet.db'}")
    await store.open()
    yield store
    await store.close()


async def create(log: SessionLog) -> None:
    p = Partition("p0000", 0, InputKind.LIST, ("https://example.org/a",), (0,), 10)
    info = {"run_id": "run-r", "partition": p.to_dict(), "task": "Summarise", "model": "m", "max_tokens": 100}
    await log.emit_event(SID, EventType.SESSION_CREATED, info)


def turn_of(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m["role"] == "assistant") + 1


def submit(arguments: str, turn: int) -> ChatResponse:
    return ChatResponse(None, (ToolCall(f"c{turn}", "submit_result", arguments),), Usage(10, 5))


def test_the_same_call_spaced_or_ordered_otherwise_is_the_same_call() -> None:
    guard = RunawayGuard(repeated_tool_calls=5)
    spellings = ['{"items": []}', '{"items":[]}', '{ "items" : [ ] }', '{\n  "items": []\n}', '{"items":  []}']
    trips = [guard.observe_turn([("submit_result", s)]) for s in spellings]
    assert trips[:4] == [None] * 4
    assert trips[4] is not None and trips[4].kind == "repeated_tool_call"
    reordered = RunawayGuard(repeated_tool_calls=2)
    assert reordered.observe_turn([("read_file", '{"path": "a", "max": 2}')]) is None
    trip = reordered.observe_turn([("read_file", '{"max":2,"path":"a"}')])
    assert trip is not None and trip.kind == "repeated_tool_call"


async def test_an_empty_submit_repeated_with_other_spacing_ends_the_session_as_nothing_new(log: SessionLog) -> None:
    await create(log)
    spellings = ['{"items": []}', '{"items":[]}', '{ "items" : [ ] }', '{\n"items": []}', '{"items":  [ ]}', "{}"]

    def script(request: ChatRequest) -> ChatResponse:
        turn = turn_of(request)
        return submit(spellings[(turn - 1) % len(spellings)], turn)

    gw = FakeGateway(lambda _sid, request: script(request))
    limits = Limits(max_turns=50, guard=lambda: RunawayGuard(repeated_tool_calls=5, no_progress_turns=20))
    out = await Harness(log=log, gateway=gw, hands=FakeHands(), limits=limits).run(SID)
    # the first is accepted; the second, spaced otherwise, brings nothing new: the session is complete
    assert out.outcome is Outcome.COMPLETED and len(gw.calls) == 2
    assert (await log.get_events(SID))[-1].data["reason"] == "repeated_submission"


BAD: list[tuple[dict[str, Any], str]] = [
    ({"title": "Page summary", "body": "   "}, "'body' is empty"),
    ({"title": "Page summary", "body": "&lt;p&gt;&amp;nbsp;&lt;/p&gt;"}, "'body' holds no text"),
    ({"title": "&amp;#x27;&amp;#x27;", "body": "The page explains asyncio tasks."}, "'title' holds no text"),
    ({"title": "The Eiffel Tower&#39;s beauty", "body": "A beautiful sight."}, "holds HTML entities (&#39;)"),
    ({"title": "Page summary", "body": "The page explains asyncio tasks.", "confidence": 9}, "not 9"),
    ({"title": "Page summary", "body": "The page explains asyncio tasks.", "confidence": 25.0}, "not 25.0"),
    ({"title": "Page summary", "body": "The page explains asyncio tasks.", "confidence": -0.5}, "not -0.5"),
]


@pytest.mark.parametrize(("item", "why"), BAD)
async def test_a_result_that_is_not_worth_keeping_is_returned_to_the_model(
    log: SessionLog, item: dict[str, Any], why: str
) -> None:
    await create(log)
    good = {"title": "Page summary", "body": "The page explains asyncio tasks.", "confidence": 0.7}

    def script(request: ChatRequest) -> ChatResponse:
        turn = turn_of(request)
        if turn == 1:
            return submit(json.dumps({"items": [item]}), turn)
        if turn == 2:  # the model read the error and sends a result worth keeping
            assert why in str(request.messages[-1]["content"])
            return submit(json.dumps({"items": [good]}), turn)
        return ChatResponse(None, (ToolCall("f", "finish", '{"summary": "done"}'),), Usage(10, 5))

    gw = FakeGateway(lambda _sid, request: script(request))
    out = await Harness(log=log, gateway=gw, hands=FakeHands()).run(SID)
    assert out.outcome is Outcome.COMPLETED
    events = await log.get_events(SID)
    refused = next(e.data for e in events if e.type == EventType.TOOL_RESULT)
    assert refused["is_error"] and refused.get("malformed") and why in refused["output"], refused
    results = [e.data for e in events if e.type == EventType.RESULT_ITEM]
    assert [(r["body"], r["confidence"]) for r in results] == [(good["body"], 0.7)]  # kept as sent, never clamped
    figures = run_figures([], events).to_summary()
    assert (figures["results_raw"], figures["results_refused"]) == (1, 1)


async def test_calls_refused_for_their_arguments_are_no_progress_however_they_vary(log: SessionLog) -> None:
    await create(log)

    def script(request: ChatRequest) -> ChatResponse:
        # a small model's habit: a confidence of 10, reworded every turn, refused every time
        turn = turn_of(request)
        items = [{"title": f"Paris {turn}", "body": "The Eiffel Tower is in Paris.", "confidence": 10}]
        return submit(json.dumps({"items": items}), turn)

    gw = FakeGateway(lambda _sid, request: script(request))
    limits = Limits(max_turns=50, guard=lambda: RunawayGuard(repeated_tool_calls=5, no_progress_turns=4))
    out = await Harness(log=log, gateway=gw, hands=FakeHands(), limits=limits).run(SID)
    assert (out.outcome, out.reason) == (Outcome.PAUSED, "no_progress") and len(gw.calls) == 4


def test_a_refused_call_still_counts_as_a_repeat() -> None:
    guard = RunawayGuard(repeated_tool_calls=2, no_progress_turns=10)
    bad = ("submit_result", '{"items": 1}')
    assert guard.observe_turn([bad], refused=[bad]) is None
    trip = guard.observe_turn([bad], refused=[bad])
    assert trip is not None and trip.kind == "repeated_tool_call"
