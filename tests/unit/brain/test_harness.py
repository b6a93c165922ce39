"""The harness rebuilds a session from its log alone and never repeats a recorded effect."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.brain.harness import Harness, Outcome
from agent_fleet.brain.step import Limits
from agent_fleet.domain.events import Event, EventType, SessionState
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import Overloaded, StoreError
from agent_fleet.hands.files import PartitionFiles
from agent_fleet.session import SessionLog, open_store
from agent_fleet.session.tap import ForwardingLog
from agent_fleet.testing.fakes import FakeGateway, FakeHands

Script = Callable[[ChatRequest], ChatResponse]


def scripted(script: Script) -> FakeGateway:
    """The model boundary answering from a script of the request alone."""
    return FakeGateway(lambda _sid, request: script(request))


def call(name: str, args: dict[str, Any], cid: str) -> ToolCall:
    return ToolCall(cid, name, json.dumps(args))


def turn_of(request: ChatRequest) -> int:
    return sum(1 for m in request.messages if m["role"] == "assistant") + 1


def dir_script(request: ChatRequest) -> ChatResponse:
    """Turn 1 reads both files, turn 2 submits one finding per file, turn 3 finishes."""
    turn = turn_of(request)
    usage = Usage(100 * turn, 10)
    if turn == 1:
        calls = (call("read_file", {"path": "a.py"}, "c1"), call("read_file", {"path": "b.py"}, "c2"))
        return ChatResponse(None, calls, usage)
    if turn == 2:
        items = [{"title": "t", "body": f"finding in {p}", "location": p} for p in ("a.py", "b.py")]
        return ChatResponse(None, (call("submit_result", {"items": items}, "c3"),), usage)
    return ChatResponse(None, (call("finish", {"summary": "done"}, "c4"),), usage)


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[SessionLog]:
    store = open_store(f"sqlite:///{tmp_path / 'fleet.db'}")
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "b.py").write_text("y = 2\n")
    (root / "secret.py").write_text("KEY = 'do-not-read'\n")
    return root


def partition(kind: InputKind = InputKind.DIRECTORY, items: tuple[str, ...] = ("a.py", "b.py")) -> Partition:
    return Partition("p0000", 0, kind, items, tuple(range(len(items))), 10)


async def create(log: SessionLog, p: Partition, sid: str = "run-x.s00000") -> str:
    info = {"run_id": "run-x", "partition": p.to_dict(), "task": "Find bugs", "model": "m", "max_tokens": 100}
    await log.emit_event(sid, EventType.SESSION_CREATED, info)
    return sid


async def types(log: SessionLog, sid: str) -> list[str]:
    return [e.type for e in await log.get_events(sid)]


async def test_full_session_records_every_step(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    gw = scripted(dir_script)
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    out = await Harness(log=log, gateway=gw, hands=hands).run(sid)
    assert out.outcome is Outcome.COMPLETED
    assert await types(log, sid) == [
        "session_created",
        "session_started",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "model_request",
        "model_response",
        "tool_call",
        "result_item",
        "result_item",
        "tool_result",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "session_completed",
    ]
    first = gw.requests[0].messages[1]["content"]
    assert first == "Task: Find bugs\n\nFiles:\n- a.py\n- b.py"
    # the second call saw the files' contents as tool results
    tool_msgs = [m["content"] for m in gw.requests[1].messages if m["role"] == "tool"]
    assert tool_msgs == ["x = 1\n", "y = 2\n"]
    items = [e.data for e in await log.get_events(sid) if e.type == EventType.RESULT_ITEM]
    assert [i["id"] for i in items] == [f"{sid}.r0000", f"{sid}.r0001"]
    assert {i["partition_id"] for i in items} == {"p0000"}
    rec = await log.get_session(sid)
    assert rec is not None and rec.state is SessionState.COMPLETED


async def test_wake_reissues_only_the_unanswered_call(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    first = dir_script(ChatRequest("m", [{"role": "user", "content": "x"}]))
    # as if the process died after recording turn 1's answer and the turn-2 request
    await log.emit_event(sid, EventType.SESSION_STARTED, {"attempt": 1})
    await log.emit_event(sid, EventType.MODEL_REQUEST, {"turn": 1})
    await log.emit_event(sid, EventType.MODEL_RESPONSE, {"turn": 1, "response": first.to_dict()})
    for c, text in zip(first.tool_calls, ("x = 1\n", "y = 2\n"), strict=True):
        await log.emit_event(sid, EventType.TOOL_CALL, {"call_id": c.id, "name": c.name, "arguments": c.arguments})
        data = {"call_id": c.id, "name": c.name, "output": text, "is_error": False}
        await log.emit_event(sid, EventType.TOOL_RESULT, data)
    await log.emit_event(sid, EventType.MODEL_REQUEST, {"turn": 2})

    gw = scripted(dir_script)
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    out = await Harness(log=log, gateway=gw, hands=hands).run(sid, attempt=2)
    assert out.outcome is Outcome.COMPLETED
    assert hands.executed == []  # recorded tool results are never run again
    assert [turn_of(r) for r in gw.requests] == [2, 3]  # turn 1 is never sent again
    evs = await log.get_events(sid)
    resent = [e.data for e in evs if e.type == EventType.MODEL_RESENT]
    reserved = Usage(gw.unanswered_prompt, gw.requests[0].max_tokens)  # the unanswered turn 2, at its reservation
    assert [(d["turn"], Usage.from_dict(d["usage"])) for d in resent] == [(2, reserved)]
    # what was spent before the crash still counts, the send of unknown fate included
    assert gw.restored[sid] == (Usage(100, 10) + reserved, Decimal(0))
    assert [e.data["turn"] for e in evs if e.type == EventType.MODEL_REQUEST] == [1, 2, 3]
    assert "session_resumed" in [e.type for e in evs]


async def test_tool_started_but_unrecorded_runs_once_more(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    first = dir_script(ChatRequest("m", [{"role": "user", "content": "x"}]))
    await log.emit_event(sid, EventType.SESSION_STARTED, {})
    await log.emit_event(sid, EventType.MODEL_REQUEST, {"turn": 1})
    await log.emit_event(sid, EventType.MODEL_RESPONSE, {"turn": 1, "response": first.to_dict()})
    c1 = first.tool_calls[0]
    await log.emit_event(sid, EventType.TOOL_CALL, {"call_id": c1.id, "name": c1.name, "arguments": c1.arguments})
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    await Harness(log=log, gateway=scripted(dir_script), hands=hands).run(sid)
    assert hands.executed == [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})]
    calls = [e.data["call_id"] for e in await log.get_events(sid) if e.type == EventType.TOOL_CALL]
    assert calls.count("c1") == 1  # the started call is not recorded twice


async def test_result_items_are_never_recorded_twice_across_crashes(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    await Harness(log=log, gateway=scripted(dir_script), hands=hands).run(sid)
    # a second harness on a completed session does nothing
    gw = scripted(dir_script)
    out = await Harness(log=log, gateway=gw, hands=hands).run(sid)
    assert out.outcome is Outcome.COMPLETED and gw.calls == []
    assert (await types(log, sid)).count("result_item") == 2


async def test_budget_pauses_then_resumes_from_the_log(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    gw = scripted(dir_script)
    gw.refuse_after = 1
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    out = await Harness(log=log, gateway=gw, hands=hands).run(sid)
    assert (out.outcome, out.reason) == (Outcome.PAUSED, "budget")
    rec = await log.get_session(sid)
    assert rec is not None and rec.state is SessionState.PAUSED
    gw.refuse_after = None
    out = await Harness(log=log, gateway=gw, hands=hands).run(sid)
    assert out.outcome is Outcome.COMPLETED
    assert [turn_of(r) for r in gw.requests] == [1, 2, 3]
    assert len(hands.executed) == 2


async def test_max_turns_pauses_with_a_reason(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    gw = scripted(dir_script)
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    out = await Harness(log=log, gateway=gw, hands=hands, limits=Limits(max_turns=2)).run(sid)
    assert (out.outcome, out.reason) == (Outcome.PAUSED, "max_turns")
    assert len(gw.calls) == 2


async def test_bad_arguments_and_out_of_scope_paths_are_tool_errors(log: SessionLog, repo: Path) -> None:
    def script(request: ChatRequest) -> ChatResponse:
        turn = turn_of(request)
        if turn == 1:
            return ChatResponse(
                None,
                (
                    ToolCall("b1", "submit_result", "{not json"),
                    call("submit_result", {"items": [{"title": 3}]}, "b2"),
                    call("read_file", {"path": "secret.py"}, "b3"),
                    call("read_file", {"path": "../repo/secret.py"}, "b4"),
                    call("rm_rf", {}, "b5"),
                ),
            )
        return ChatResponse("all done", ())

    sid = await create(log, partition())
    out = await Harness(log=log, gateway=scripted(script), hands=PartitionFiles(repo, ("a.py", "b.py"))).run(sid)
    assert out.outcome is Outcome.COMPLETED
    results = {e.data["call_id"]: e.data for e in await log.get_events(sid) if e.type == EventType.TOOL_RESULT}
    assert all(r["is_error"] for r in results.values())
    assert "do-not-read" not in json.dumps(results)
    assert "not in this partition" in results["b3"]["output"]
    items = [e.data for e in await log.get_events(sid) if e.type == EventType.RESULT_ITEM]
    # a final text answer counts as one result when nothing was submitted
    assert [(i["title"], i["body"]) for i in items] == [("all done", "all done")]


async def test_provider_error_is_recorded_and_raised(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    gw = scripted(dir_script)
    gw.replies.append(Overloaded("overloaded", status=529))
    with pytest.raises(Overloaded):
        await Harness(log=log, gateway=gw, hands=PartitionFiles(repo, ("a.py", "b.py"))).run(sid)
    evs = await log.get_events(sid)
    assert evs[-1].type == EventType.MODEL_ERROR and evs[-1].data["status"] == 529
    out = await Harness(log=log, gateway=gw, hands=PartitionFiles(repo, ("a.py", "b.py"))).run(sid, attempt=2)
    assert out.outcome is Outcome.COMPLETED
    requests = [e.data for e in await log.get_events(sid) if e.type == EventType.MODEL_REQUEST]
    # turn 1 failed with an answered error and was sent again: a send of unknown fate until answered
    assert [(r["turn"], r.get("again", False)) for r in requests] == [(1, False), (1, True), (2, False), (3, False)]


async def test_runaway_guard_pauses_a_session_repeating_itself_and_survives_a_rebuild(
    log: SessionLog, repo: Path
) -> None:
    from agent_fleet.spend.guards import RunawayGuard

    def script(request: ChatRequest) -> ChatResponse:
        return ChatResponse(None, (call("read_file", {"path": "a.py"}, f"r{turn_of(request)}"),))

    limits = Limits(max_turns=50, guard=lambda: RunawayGuard(repeated_tool_calls=3, no_progress_turns=20))
    sid = await create(log, partition())
    gw = scripted(script)
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    out = await Harness(log=log, gateway=gw, hands=hands, limits=limits).run(sid)
    assert (out.outcome, out.reason) == (Outcome.PAUSED, "repeated_tool_call")
    assert len(gw.calls) == 3
    paused = (await log.get_events(sid))[-1]
    assert paused.data["reason"] == "repeated_tool_call" and "3 turns in a row" in paused.data["message"]
    # a new harness rebuilds the guard from the log and does not spend another call
    out = await Harness(log=log, gateway=gw, hands=hands, limits=limits).run(sid)
    assert out.reason == "repeated_tool_call" and len(gw.calls) == 3


class HeldLog(ForwardingLog):
    """Holds every append that records a model request until the test lets it through."""

    def __init__(self, inner: SessionLog) -> None:
        super().__init__(inner)
        self.release = asyncio.Event()
        self.appends: list[list[str]] = []
        self.committed: list[list[str]] = []
        self.fail_request = False

    async def emit_event(self, session_id: str, type: str, data: Mapping[str, Any] | None = None) -> Event:
        return (await self.emit_events(session_id, [(type, data or {})]))[0]

    async def emit_events(self, session_id: str, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Event]:
        kinds = [t for t, _ in events]
        self.appends.append(kinds)
        if EventType.MODEL_REQUEST in kinds:
            if self.fail_request:
                raise StoreError("disk gone (injected)")
            await self.release.wait()
        written = await self.inner.emit_events(session_id, events)
        self.committed.append(kinds)
        return written


async def test_the_call_leaves_while_its_request_is_written_and_the_start_shares_that_append(
    log: SessionLog, repo: Path
) -> None:
    sid = await create(log, partition())
    held = HeldLog(log)
    committed_at_call: list[list[list[str]]] = []

    def script(request: ChatRequest) -> ChatResponse:
        committed_at_call.append(list(held.committed))
        held.release.set()  # the request is written only once the call is out
        return dir_script(request)

    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    async with asyncio.timeout(10):  # a harness that waited for the request's commit would wait forever
        out = await Harness(log=held, gateway=scripted(script), hands=hands).run(sid)
    assert out.outcome is Outcome.COMPLETED
    # the first call went out before anything of the session was committed; start and request share an append
    assert committed_at_call[0] == []
    assert held.appends[0] == ["session_started", "model_request"]
    evs = await log.get_events(sid)
    kinds = [e.type for e in evs]
    # ... and each response is recorded after its request: the log reads as before
    assert kinds[:4] == ["session_created", "session_started", "model_request", "model_response"]
    assert [e.data["turn"] for e in evs if e.type == EventType.MODEL_REQUEST] == [1, 2, 3]
    assert [e.data["turn"] for e in evs if e.type == EventType.MODEL_RESPONSE] == [1, 2, 3]


async def test_a_request_that_never_became_durable_is_sent_as_a_fresh_call(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition())
    held = HeldLog(log)
    held.fail_request = True
    gw = scripted(dir_script)
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    with pytest.raises(StoreError):
        await Harness(log=held, gateway=gw, hands=hands).run(sid)
    assert len(gw.calls) == 1 and await types(log, sid) == ["session_created"]  # sent, never recorded
    out = await Harness(log=log, gateway=gw, hands=hands).run(sid, attempt=2)
    assert out.outcome is Outcome.COMPLETED
    evs = await log.get_events(sid)
    assert [e.data["turn"] for e in evs if e.type == EventType.MODEL_REQUEST] == [1, 2, 3]
    assert [e.type for e in evs][1] == "session_started"  # it had never started, as far as the log knows
    assert [turn_of(r) for r in gw.requests] == [1, 1, 2, 3]


async def appends_of_a_session(log: SessionLog, repo: Path, script: Script) -> tuple[str, list[list[str]]]:
    """Run a session to its end; its id and the event types of each append it made."""
    sid = await create(log, partition())
    held = HeldLog(log)
    held.release.set()
    hands = FakeHands(inner=PartitionFiles(repo, ("a.py", "b.py")))
    out = await Harness(log=held, gateway=scripted(script), hands=hands).run(sid)
    assert out.outcome is Outcome.COMPLETED
    return sid, held.appends


async def test_a_finish_that_ends_its_turn_is_recorded_with_the_completion_in_one_append(
    log: SessionLog, repo: Path
) -> None:
    sid, appends = await appends_of_a_session(log, repo, dir_script)
    assert appends[-1] == ["tool_call", "tool_result", "session_completed"]
    done = [e for e in await log.get_events(sid) if e.type == EventType.SESSION_COMPLETED]
    assert [e.data for e in done] == [{"summary": "done", "results": 2}]


async def test_a_finish_before_other_calls_of_its_turn_completes_after_them(log: SessionLog, repo: Path) -> None:
    def script(request: ChatRequest) -> ChatResponse:
        items = [{"title": "t", "body": "late finding"}]
        calls = (call("finish", {"summary": "done"}, "c1"), call("submit_result", {"items": items}, "c2"))
        return ChatResponse(None, calls, Usage(10, 1))

    sid, appends = await appends_of_a_session(log, repo, script)
    assert appends[-3:] == [
        ["tool_call", "tool_result"],
        ["tool_call", "result_item", "tool_result"],
        ["session_completed"],
    ]
    done = [e.data for e in await log.get_events(sid) if e.type == EventType.SESSION_COMPLETED]
    assert done == [{"summary": "done", "results": 1}]


def submits_the_same(request: ChatRequest) -> ChatResponse:
    """A small model's habit: it submits its one finding again every turn instead of calling finish."""
    items = [{"title": "Paris", "body": "The Eiffel Tower is in Paris.", "confidence": 0.9}]
    return ChatResponse(None, (call("submit_result", {"items": items}, f"c{turn_of(request)}"),), Usage(10, 5))


async def test_a_submission_of_nothing_new_completes_the_session_with_its_results_in(
    log: SessionLog, repo: Path
) -> None:
    from agent_fleet.spend.guards import RunawayGuard

    limits = Limits(max_turns=40, guard=lambda: RunawayGuard(repeated_tool_calls=5))
    sid = await create(log, partition(InputKind.LIST, ("The Eiffel Tower is in Paris.",)))
    gw = scripted(submits_the_same)
    out = await Harness(log=log, gateway=gw, hands=FakeHands(), limits=limits).run(sid)
    # completed, not paused by the runaway guard: the second call submitted nothing new
    assert out.outcome is Outcome.COMPLETED and len(gw.calls) == 2
    evs = await log.get_events(sid)
    assert [e.type for e in evs][-4:] == ["model_response", "tool_call", "tool_result", "session_completed"]
    assert [e.data["title"] for e in evs if e.type == EventType.RESULT_ITEM] == ["Paris"]  # recorded once
    results = [e.data for e in evs if e.type == EventType.TOOL_RESULT]
    assert results[0]["output"] == "accepted 1 result(s)" and not results[0].get("repeated")
    assert results[1]["repeated"] is True and not results[1]["is_error"]
    assert results[1]["output"] == "nothing new (the 1 result(s) were submitted before): finished"
    assert evs[-1].data == {"summary": "", "results": 1, "reason": "repeated_submission"}


async def test_a_repeated_submission_is_known_after_a_crash_from_the_log_alone(log: SessionLog, repo: Path) -> None:
    sid = await create(log, partition(InputKind.LIST, ("The Eiffel Tower is in Paris.",)))

    def crashing(request: ChatRequest) -> ChatResponse:
        if turn_of(request) == 2:
            raise RuntimeError("the worker died")
        return submits_the_same(request)

    with pytest.raises(RuntimeError):
        await Harness(log=log, gateway=scripted(crashing), hands=FakeHands()).run(sid)
    gw = scripted(submits_the_same)
    out = await Harness(log=log, gateway=gw, hands=FakeHands()).run(sid, attempt=2)
    assert out.outcome is Outcome.COMPLETED and len(gw.calls) == 1
    evs = await log.get_events(sid)
    assert sum(e.type == EventType.RESULT_ITEM for e in evs) == 1
    assert evs[-1].data["reason"] == "repeated_submission"


async def test_only_the_new_findings_of_a_submission_are_recorded_and_the_session_goes_on(
    log: SessionLog, repo: Path
) -> None:
    a, b, c = ({"title": t, "body": f"about {t}"} for t in ("a", "b", "c"))

    def script(request: ChatRequest) -> ChatResponse:
        turn = turn_of(request)
        if turn == 3:
            return ChatResponse(None, (call("finish", {"summary": "done"}, "f"),))
        # the first names b twice (both count); the second repeats a (its keys in another order) and brings c
        items = [a, b, b] if turn == 1 else [{"body": "about a", "title": "a"}, c]
        return ChatResponse(None, (call("submit_result", {"items": items}, f"s{turn}"),))

    sid = await create(log, partition(InputKind.LIST, ("x",)))
    out = await Harness(log=log, gateway=scripted(script), hands=FakeHands()).run(sid)
    assert out.outcome is Outcome.COMPLETED
    evs = await log.get_events(sid)
    recorded = [e.data for e in evs if e.type == EventType.RESULT_ITEM]
    assert [r["title"] for r in recorded] == ["a", "b", "b", "c"]
    assert [r["id"] for r in recorded] == [f"{sid}.r{n:04d}" for n in range(4)]
    outputs = [e.data["output"] for e in evs if e.type == EventType.TOOL_RESULT and e.data["name"] == "submit_result"]
    assert outputs == ["accepted 3 result(s)", "accepted 1 result(s); 1 submitted before, not recorded again"]
    assert evs[-1].data == {"summary": "done", "results": 4}


@pytest.mark.parametrize("first", [[], [{"title": "Paris", "body": "The Eiffel Tower is in Paris."}]])
async def test_an_empty_submission_after_an_accepted_one_completes_the_session(
    log: SessionLog, repo: Path, first: list[dict[str, Any]]
) -> None:
    from agent_fleet.spend.guards import RunawayGuard

    def script(request: ChatRequest) -> ChatResponse:
        turn = turn_of(request)
        items = first if turn == 1 else []
        return ChatResponse(None, (call("submit_result", {"items": items}, f"c{turn}"),), Usage(10, 5))

    limits = Limits(max_turns=40, guard=lambda: RunawayGuard(repeated_tool_calls=5))
    sid = await create(log, partition(InputKind.LIST, ("The Eiffel Tower is in Paris.",)))
    gw = scripted(script)
    out = await Harness(log=log, gateway=gw, hands=FakeHands(), limits=limits).run(sid)
    assert out.outcome is Outcome.COMPLETED and len(gw.calls) == 2  # the first is accepted, the second ends it
    evs = await log.get_events(sid)
    outputs = [e.data["output"] for e in evs if e.type == EventType.TOOL_RESULT]
    assert outputs == [f"accepted {len(first)} result(s)", "nothing new (no result given): finished"]
    assert evs[-1].data == {"summary": "", "results": len(first), "reason": "repeated_submission"}
