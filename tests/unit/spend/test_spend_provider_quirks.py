"""Server quirks are data, learned from the server's own answers (a scripted server speaking as
llama-cpp-python does): a null content it refuses with a 500 is sent as ``""`` from then on, tools it
cannot stream are sent unstreamed from then on, a stream without usage is not streamed again, and a 500
that is the request's fault (refused twice, while the server answers other requests) is a client error,
not retried into a storm. The server answers through the mock transport; the gateway runs on a virtual clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.calls import Quirks
from agent_fleet.domain.model import ChatRequest, ToolSpec
from agent_fleet.errors import ClientRequestError
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import OpenAIProvider
from agent_fleet.spend.providers.transport import Answer, MockRequest, MockTransport

Server = Callable[[dict[str, Any]], tuple[int, Any, dict[str, str]]]


@dataclass
class Scripted:
    """Answers every request with ``default(body)``; records the bodies it got."""

    default: Server | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = "http://127.0.0.1:9/v1"
    clock: VirtualClock = field(default_factory=VirtualClock)

    def handle(self, request: MockRequest) -> Answer:
        body = request.json()
        self.seen.append({"path": request.path, "body": body})
        assert self.default is not None
        status, payload, headers = self.default(body)
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return Answer(status, {"content-type": "application/json", **headers}, text.encode())


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()


TOOL = ToolSpec("submit_result", "report", {"type": "object", "properties": {}})
FIRST = [{"role": "user", "content": "Task: look"}]
SECOND = [
    *FIRST,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "submit_result", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "accepted 0 result(s)"},
]
ANSWER = {
    "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3},
}


def _500(message: str) -> tuple[int, Any, dict[str, str]]:
    return 500, {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}, {}


def llama_cpp_python(body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
    """What llama-cpp-python's server answered the engine: a null content breaks its template, automatic
    tool choice cannot be streamed, and its streams carry no usage."""
    if any(m.get("role") == "assistant" and m.get("content") is None for m in body["messages"]):
        return _500('can only concatenate str (not "NoneType") to str')
    if body.get("stream") and body.get("tools"):
        return _500("Automatic streaming tool choice is not supported")
    if body.get("stream"):
        chunk = {"choices": [{"delta": {"content": "done"}, "finish_reason": "stop"}]}
        return 200, f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n", {}
    return 200, ANSWER, {}


def gateway(scripted: Scripted) -> tuple[Gateway, OpenAIProvider]:
    provider = OpenAIProvider(
        api_key="local", base_url=scripted.base_url, model="smollm2", transport=MockTransport(scripted.handle)
    )
    return Gateway(provider, rand=lambda: 0.0, clock=scripted.clock), provider


async def test_quirks_are_learned_from_the_answers_and_remembered(scripted: Scripted) -> None:
    scripted.default = llama_cpp_python
    gw, provider = gateway(scripted)
    async with scripted.clock.auto_advance():
        try:
            for messages in (FIRST, SECOND, SECOND):
                answer = await gw.complete("s1", ChatRequest(model="smollm2", messages=messages, tools=(TOOL,)))
                assert answer.content == "done" and answer.usage.input_tokens == 12
            streams = [s["body"].get("stream", False) for s in scripted.seen]
            # call 1: streamed with tools (refused), then unstreamed; call 2: null refused, then ""; call 3: at once
            assert streams == [True, False, False, False, False]
            assert [s["body"]["messages"][1].get("content") for s in scripted.seen[2:]] == [None, "", ""]
            assert provider.quirks.known == {"no_streaming_with_tools": True, "content_null_as_empty": True}
            # a call without tools is still streamed (by a gateway that has not seen the model's pace yet);
            # its stream carries no usage, so it is charged its reservation and the server is not streamed to again
            await gw.aclose()
            gw = Gateway(provider, rand=lambda: 0.0, clock=scripted.clock)
            plain = ChatRequest(model="smollm2", messages=FIRST, max_tokens=50)
            streamed = await gw.complete("s1", plain)
            assert scripted.seen[-1]["body"]["stream"] is True and streamed.usage.output_tokens == 50
            assert provider.quirks.has("no_usage_chunk") is True
            await gw.complete("s1", plain)
            assert "stream" not in scripted.seen[-1]["body"]
        finally:
            await gw.aclose()


async def test_a_500_that_is_the_requests_fault_is_a_client_error_not_a_retry_storm(scripted: Scripted) -> None:
    def server(body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if body["messages"][-1]["content"] == "Task: poison":
            return _500("list index out of range")
        return 200, ANSWER, {}

    scripted.default = server
    gw, _ = gateway(scripted)
    async with scripted.clock.auto_advance():
        try:
            await gw.complete("s1", ChatRequest(model="smollm2", messages=FIRST))  # the server answers others
            with pytest.raises(ClientRequestError) as info:
                await gw.complete(
                    "s1", ChatRequest(model="smollm2", messages=[{"role": "user", "content": "Task: poison"}])
                )
            assert "a client error sent as a 500" in str(info.value)
            # one retry found it (the same request refused again), then no more: 3 requests, not 1 + 4
            assert len(scripted.seen) == 3
        finally:
            await gw.aclose()


async def test_tool_results_reach_a_template_that_drops_tool_messages_as_user_messages(scripted: Scripted) -> None:
    scripted.default = lambda body: (200, ANSWER, {})
    provider = OpenAIProvider(
        api_key="local",
        base_url=scripted.base_url,
        model="smollm2",
        quirks=Quirks.declared(["tool_results_as_user"]),
        transport=MockTransport(scripted.handle),
    )
    try:
        await provider.complete(ChatRequest(model="smollm2", messages=SECOND, tools=(TOOL,)))
    finally:
        await provider.aclose()
    sent = scripted.seen[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == "Result of submit_result: accepted 0 result(s)"


def test_tool_results_as_user_carry_no_call_id_so_two_runs_send_the_same_prompt() -> None:
    from agent_fleet.spend.providers.openai import _tool_results_as_user

    def turn(ids: tuple[str, str]) -> list[dict[str, Any]]:
        made = [{"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}} for i in ids]
        results = [{"role": "tool", "tool_call_id": i, "content": f"page {n}"} for n, i in enumerate(ids, 1)]
        return [*FIRST, {"role": "assistant", "content": None, "tool_calls": made}, *results]

    # a server makes up its call ids: two runs of the same conversation differ only in them
    one = _tool_results_as_user(turn(("call_0_cmpl-8e14f3ca", "call_1_cmpl-8e14f3ca")))
    two = _tool_results_as_user(turn(("call_0_cmpl-22231751", "call_1_cmpl-22231751")))
    assert [m["content"] for m in one[2:]] == [m["content"] for m in two[2:]]
    assert [m["content"] for m in one[2:]] == [
        "Result of read_file (call 1 of 2): page 1",
        "Result of read_file (call 2 of 2): page 2",
    ]
