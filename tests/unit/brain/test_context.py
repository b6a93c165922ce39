"""Context care: which tool results are trimmed, when the older turns are compacted, and how the harness
records a compaction once and reuses it after a crash."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.brain.context import COMPACT_SYSTEM_PROMPT, ContextCare, Summary, compaction_request, fit
from agent_fleet.brain.harness import Harness, Outcome
from agent_fleet.brain.step import Limits
from agent_fleet.brain.view import SessionView
from agent_fleet.config import FleetConfig, load_config
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.engine.limits import session_limits
from agent_fleet.options import RunOptions
from agent_fleet.session.memory import MemorySessionLog
from agent_fleet.testing.fakes import FakeGateway, FakeHands

STUB = "[trimmed to fit the context window: 300 characters of read_file output]"


def conversation(turns: int = 6) -> list[dict[str, Any]]:
    """30-character system and user messages, then turns of one 16-character call and a 300-character result."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "S" * 30}, {"role": "user", "content": "U" * 30}]
    for n in range(1, turns + 1):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": '{"p":1}'}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{n}", "content": "x" * 300})
    return msgs


def care(window: int, **kw: Any) -> ContextCare:
    return ContextCare(window=lambda _model: window, threshold=1.0, keep_turns=2, trim_step=kw.pop("step", 1), **kw)


def results(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def test_a_conversation_inside_its_limit_is_sent_unchanged() -> None:
    msgs = conversation()
    # 60 + 6 * 316 characters at 3 a token, 8 a message for 14 messages, 16 a request
    out = fit(msgs, (), model="m", max_tokens=0, care=care(780))
    assert (out.messages, out.estimate, out.full_estimate, out.trimmed, out.compact) == (msgs, 780, 780, 0, None)
    off = fit(msgs, (), model="m", max_tokens=0, care=ContextCare(enabled=False, window=lambda _m: 10))
    assert off.messages == msgs and off.compact is None


def test_the_oldest_tool_results_are_trimmed_until_the_request_fits() -> None:
    msgs = conversation()
    assert len(STUB) == 71
    out = fit(msgs, (), model="m", max_tokens=0, care=care(700))
    # each stub saves 229 characters: two of them bring 780 down to (1956 - 458) // 3 + 112 + 16 = 627
    assert (out.trimmed, out.estimate, out.compact) == (2, 627, None)
    assert results(out.messages) == [STUB, STUB] + ["x" * 300] * 4
    assert results(msgs) == ["x" * 300] * 6  # the conversation itself is untouched
    # every call keeps its result, right after it, in order
    assert [m.get("tool_call_id") for m in out.messages if m["role"] == "tool"] == [f"c{n}" for n in range(1, 7)]
    assert [m["role"] for m in out.messages] == ["system", "user"] + ["assistant", "tool"] * 6


def test_trimming_ends_on_a_step_so_the_prefix_stays_the_same() -> None:
    # the limit is met after turn 2; with steps of 3 the results of turns 1-3 go
    out = fit(conversation(), (), model="m", max_tokens=0, care=care(700, step=3))
    assert (out.trimmed, out.estimate) == (3, (1956 - 3 * 229) // 3 + 128)
    assert results(out.messages) == [STUB] * 3 + ["x" * 300] * 3
    # two turns later the same three are trimmed: the request starts as the one before did
    later = fit(conversation(8), (), model="m", max_tokens=0, care=care(1000, step=3))
    assert results(later.messages) == [STUB] * 3 + ["x" * 300] * 5
    assert later.messages[:10] == out.messages[:10]
    # nothing is trimmed while the request fits, whatever the step
    assert fit(conversation(), (), model="m", max_tokens=0, care=care(780, step=3)).trimmed == 0


def test_the_output_limit_and_threshold_come_off_the_window() -> None:
    limit = ContextCare(window=lambda _m: 16_000, threshold=0.75).limit("m", 2048)
    assert limit == int((16_000 - 2048) * 0.75) == 10_464
    out = fit(conversation(), (), model="m", max_tokens=300, care=care(1000))  # limit 700, as above
    assert (out.trimmed, out.estimate) == (2, 627)


def test_the_last_turns_are_never_trimmed_and_compaction_is_asked_when_trimming_is_not_enough() -> None:
    out = fit(conversation(), (), model="m", max_tokens=0, care=care(300))
    # turns 1-4 trimmed: (1956 - 4 * 229) // 3 + 128 = 474, still over 300: compact turns 1-4
    assert (out.trimmed, out.estimate, out.compact) == (4, 474, (1, 4))
    assert results(out.messages) == [STUB] * 4 + ["x" * 300] * 2


def test_a_recorded_summary_replaces_the_turns_it_covers() -> None:
    summary = Summary(1, 4, "Read four pages.")
    out = fit(conversation(), (), model="m", max_tokens=0, care=care(300), summary=summary)
    note = "\n\nEarlier turns 1-4, compacted: Read four pages."
    assert out.messages[1] == {"role": "user", "content": "U" * 30 + note}
    assert [m.get("tool_call_id") for m in out.messages[2:]] == [None, "c5", None, "c6"]
    assert (out.trimmed, out.compact) == (0, None)
    # the summary is used even once the conversation would fit again: the request is one function of the log
    small = fit(conversation(), (), model="m", max_tokens=0, care=care(10_000), summary=summary)
    assert small.messages == out.messages


def test_a_second_compaction_starts_after_the_summary() -> None:
    out = fit(conversation(10), (), model="m", max_tokens=0, care=care(300), summary=Summary(1, 4, "Read four pages."))
    assert out.compact == (5, 8)
    req = compaction_request(conversation(10), (5, 8), model="m", care=care(300), summary=Summary(1, 4, "Four."))
    assert req.tools == () and req.max_tokens == 512
    assert req.messages[0] == {"role": "system", "content": COMPACT_SYSTEM_PROMPT}
    text = req.messages[1]["content"]
    assert text.startswith("Summary of turns 1-4: Four.\n\nTask message:\nUUU")
    lines = text.split("Turns 5-8:\n", 1)[1].split("\n")
    assert [line.split(":", 1)[0] for line in lines] == ["Turn 5", "Turn 6", "Turn 7", "Turn 8"]
    for n, line in enumerate(lines, start=5):
        assert line.startswith(f'Turn {n}: called read_file({{"p":1}}) -> xxx')


def test_a_compaction_request_fits_its_window_however_many_turns() -> None:
    msgs = conversation(400)
    c = ContextCare(window=lambda _m: 16_000, summary_tokens=512)
    req = compaction_request(msgs, (1, 396), model="m", care=c)
    chars = sum(len(m["content"]) for m in req.messages)
    assert chars // 3 + 32 <= c.limit("m", 512)


# -- the harness ---------------------------------------------------------------------------------

SID = "run-c.s00000"
PAGE = "p" * 600
PAGES = 60


def pages_script(_sid: str, request: ChatRequest) -> ChatResponse:
    """Reads page after page (the next after the last one it sees) until PAGES, then finishes; a summary request
    gets a summary."""
    if not request.tools:
        return ChatResponse("Read the pages so far.", usage=Usage(50, 7))
    asked = [
        json.loads(c["function"]["arguments"])["page"]
        for m in request.messages
        for c in m.get("tool_calls") or ()
        if c["function"]["name"] == "read_page"
    ]
    last = max(asked, default=0)
    if last >= PAGES:
        return ChatResponse(None, (ToolCall("f", "finish", json.dumps({"summary": "done"})),), Usage(10, 1))
    call = ToolCall(f"c{last + 1}", "read_page", json.dumps({"page": last + 1}))
    return ChatResponse(None, (call,), Usage(10, 1))


async def new_log() -> MemorySessionLog:
    log = MemorySessionLog()
    await log.open()
    part = Partition("p0", 0, InputKind.NONE, (), (), 10)
    info = {"run_id": "run-c", "partition": part.to_dict(), "task": "Read", "model": "m", "max_tokens": 100}
    await log.emit_event(SID, EventType.SESSION_CREATED, info)
    return log


def harness(log: MemorySessionLog, gw: FakeGateway, window: int = 3000) -> Harness:
    limits = Limits(max_turns=100, context=ContextCare(window=lambda _m: window, keep_turns=3))
    return Harness(log=log, gateway=gw, hands=FakeHands({"read_page": PAGE}), limits=limits)


async def test_the_harness_compacts_once_records_it_and_meters_it() -> None:
    log = await new_log()
    gw = FakeGateway(pages_script)
    out = await harness(log, gw).run(SID)
    assert out.outcome is Outcome.COMPLETED
    events = await log.get_events(SID)
    assert sum(1 for e in events if e.type == EventType.MODEL_RESPONSE) == PAGES + 1
    assert sum(1 for e in events if e.type == EventType.TOOL_RESULT) == PAGES + 1
    compactions = [e.data for e in events if e.type == EventType.CONTEXT_COMPACTED]
    summary_calls = [r for r in gw.requests if not r.tools]
    assert len(compactions) == len(summary_calls) >= 2
    spans = [(c["from_turn"], c["through_turn"]) for c in compactions]
    assert spans[0][0] == 1 and all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
    assert summary_calls[1].messages[1]["content"].startswith(f"Summary of turns 1-{spans[0][1]}: Read the pages")
    for c in compactions:
        assert c["summary"] == "Read the pages so far." and c["response"]["usage"]["input_tokens"] == 50
    # the summary's call carries the session's output limit (100), as every call of the session does
    assert {r.max_tokens for r in summary_calls} == {100}
    # after a compaction every request carries its summary, none carries the turns it covers
    limit = ContextCare(window=lambda _m: 3000).limit("m", 100)
    for request in gw.requests:
        assert sum(len(m.get("content") or "") for m in request.messages) // 3 < limit
    view_usage = sum((Usage(10, 1) for _ in range(PAGES + 1)), Usage(50 * len(compactions), 7 * len(compactions)))
    assert SessionView.from_events(events).usage == view_usage


async def test_a_resumed_session_reuses_the_recorded_summary() -> None:
    log = await new_log()
    crash_after: list[int] = []

    def crashing(sid: str, request: ChatRequest) -> ChatResponse:
        if not request.tools:
            crash_after.append(len(crash_after))
        elif crash_after and len(crash_after) == 1 and "compacted" in str(request.messages[1]["content"]):
            raise RuntimeError("the worker died")  # right after the first summary was recorded
        return pages_script(sid, request)

    with pytest.raises(RuntimeError):
        await harness(log, FakeGateway(crashing)).run(SID)
    before = [e.data for e in await log.get_events(SID) if e.type == EventType.CONTEXT_COMPACTED]
    assert len(before) == 1
    gw = FakeGateway(pages_script)
    assert (await harness(log, gw).run(SID, attempt=2)).outcome is Outcome.COMPLETED
    first = gw.requests[0]
    assert first.tools and first.messages[1]["content"].endswith(f"compacted: {before[0]['summary']}")
    after = [e.data for e in await log.get_events(SID) if e.type == EventType.CONTEXT_COMPACTED]
    assert after[0] == before[0]
    assert all(a["from_turn"] > before[0]["through_turn"] for a in after[1:])


def test_fleet_yaml_sets_windows_and_care(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "models: [{name: small, model: sim-small, context_window: 16000}]\n"
        "context: {care: false, threshold: 0.5, keep_turns: 2}\n"
    )
    care = session_limits(RunOptions(task="t"), load_config(path)).context
    assert (care.enabled, care.threshold, care.keep_turns, care.summary_tokens) == (False, 0.5, 2, 512)
    assert (care.window_of("sim-small"), care.window_of("small")) == (16_000, 16_000)
    assert care.window_of("claude-sonnet-4-5") == 200_000  # genai-prices
    assert care.window_of("a-model-nobody-knows") == 128_000
    assert session_limits(RunOptions(task="t"), FleetConfig()).context.enabled


# -- a server that counts more tokens than the estimate --------------------------------------------


def counting_server(window: int, per_token: float) -> FakeGateway:
    """A server with a window of ``window`` tokens that counts ``per_token`` tokens per token of the raw
    estimate (its chat template and tokenizer): a prompt over its window is refused, as llama.cpp's is;
    an answer reports what it counted."""
    from agent_fleet.domain.tokens import raw_prompt_estimate
    from agent_fleet.errors import ContextLengthExceeded

    def serve(sid: str, request: ChatRequest) -> ChatResponse:
        counted = math.ceil(raw_prompt_estimate(request) * per_token)
        if counted + request.max_tokens > window:
            raise ContextLengthExceeded(f"Requested tokens ({counted + request.max_tokens}) exceed context window")
        answer = pages_script(sid, request)
        return ChatResponse(answer.content, answer.tool_calls, Usage(counted, answer.usage.output_tokens))

    return FakeGateway(serve)


async def test_requests_fit_the_window_the_server_counts_once_it_has_answered() -> None:
    log = await new_log()
    gw = counting_server(3000, per_token=1.6)
    out = await harness(log, gw).run(SID)  # the raw estimate alone lets a request grow to 1.6 × 0.75 of the window
    assert out.outcome is Outcome.COMPLETED, [e.data for e in await log.get_events(SID)][-1]
    events = await log.get_events(SID)
    requests = [e.data for e in events if e.type == EventType.MODEL_REQUEST]
    answers = [e.data["response"]["usage"]["input_tokens"] for e in events if e.type == EventType.MODEL_RESPONSE]
    assert len(requests) == len(answers) == PAGES + 1
    # each request recorded its raw estimate; the server counted 1.6 times it, and the view learned that
    assert all(a == math.ceil(r["estimate"] * 1.6) for r, a in zip(requests, answers, strict=True))
    assert SessionView.from_events(events).prompt_factor == pytest.approx(1.6, rel=0.01)
    limit = ContextCare(window=lambda _m: 3000).limit("m", 100)  # what the server counts stays under the limit
    assert max(answers) <= limit and max(answers) > limit * 0.6  # (and the window is used)
    compactions = [e.data for e in events if e.type == EventType.CONTEXT_COMPACTED]
    assert compactions and all(c["tokens_before"] > limit >= c["tokens_after"] for c in compactions)


def test_a_server_that_counts_fewer_tokens_does_not_loosen_the_limit() -> None:
    care = ContextCare(window=lambda _m: 3000)
    assert care.limit("m", 100, 0.5) == care.limit("m", 100) == 2175 and care.limit("m", 100, 1.5) == 1450
