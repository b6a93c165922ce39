"""The OpenAI and Anthropic providers against a scripted server behind the mock transport: what they
send, how they read answers and map errors, without a socket."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_fleet.domain.model import ChatRequest, ToolSpec
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import (
    ClientRequestError,
    ConfigError,
    MalformedResponse,
    ModelNotFound,
    Overloaded,
    ProviderAuthError,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExhausted,
    RateLimited,
)
from agent_fleet.spend.providers import (
    AnthropicProvider,
    OpenAIProvider,
    build_provider,
    resolve_api_key,
    resolve_base_url,
)
from agent_fleet.spend.providers._wire import parse_duration
from agent_fleet.spend.providers.anthropic import (
    anthropic_body,
    anthropic_response,
    from_anthropic_request,
    to_anthropic_response,
)
from agent_fleet.spend.providers.transport import Answer, MockRequest, MockTransport, TransportError

KEY = "sk-test-SECRET-0123456789"
TOOL = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})

CONVERSATION = [
    {"role": "system", "content": "You review code."},
    {"role": "user", "content": "Task: find bugs"},
    {
        "role": "assistant",
        "content": "Reading both.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b.py"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
    {"role": "tool", "tool_call_id": "c2", "content": "print(2)"},
]


@dataclass
class Scripted:
    """Answers each request with the next scripted (status, body, headers); records what it got."""

    replies: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    headers: list[Mapping[str, str]] = field(default_factory=list)
    base_url: str = "http://127.0.0.1:9/v1"

    def handle(self, request: MockRequest) -> Answer:
        self.seen.append({"path": "/v1/" + request.path, "body": request.json()})
        self.headers.append(request.headers)
        status, payload, headers = self.replies.pop(0) if self.replies else (500, {"error": {"message": "none"}}, {})
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return Answer(status, {"content-type": "application/json", **headers}, text.encode())

    @property
    def transport(self) -> MockTransport:
        return MockTransport(self.handle)


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()


def openai_ok(**usage: int) -> dict[str, object]:
    return {
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "finish", "arguments": '{"summary":"ok"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": usage.get("prompt", 100),
            "completion_tokens": usage.get("completion", 20),
            "prompt_tokens_details": {"cached_tokens": usage.get("cached", 0)},
        },
    }


async def test_openai_request_and_response(scripted):
    scripted.replies.append((200, openai_ok(prompt=1000, completion=50, cached=600), {}))
    p = OpenAIProvider(api_key=KEY, base_url=scripted.base_url, transport=scripted.transport, model="gpt-4.1-mini")
    try:
        r = await p.complete(
            ChatRequest(model="", messages=CONVERSATION, tools=(TOOL,), max_tokens=321, temperature=0.2)
        )
    finally:
        await p.aclose()
    sent = scripted.seen[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["model"] == "gpt-4.1-mini"
    assert sent["body"]["max_tokens"] == 321
    assert sent["body"]["messages"] == CONVERSATION
    assert sent["body"]["tools"][0]["function"]["name"] == "read_file"
    assert sent["body"]["temperature"] == 0.2
    assert scripted.headers[0]["authorization"] == f"Bearer {KEY}"
    # prompt_tokens already includes cached_tokens: kept as is, never added twice
    assert r.usage == Usage(input_tokens=1000, output_tokens=50, cached_input_tokens=600)
    assert r.tool_calls[0].name == "finish" and r.tool_calls[0].arguments == '{"summary":"ok"}'
    assert r.finish_reason == "tool_calls"


def test_anthropic_translation_of_a_tool_conversation():
    body = anthropic_body(ChatRequest(model="m", messages=CONVERSATION, tools=(TOOL,), max_tokens=99), "claude-x")
    assert body["system"] == "You review code."
    assert body["max_tokens"] == 99
    # prompt-cache breakpoints: the last tool (tools and system are the stable prefix) and the last block
    ephemeral = {"type": "ephemeral"}
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file", "input_schema": TOOL.parameters, "cache_control": ephemeral}
    ]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]  # two tool results merged into one user turn
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Reading both."}
    assert assistant[1] == {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a.py"}}
    results = body["messages"][2]["content"]
    assert results == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "print(1)"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "print(2)", "cache_control": ephemeral},
    ]
    assert json.dumps(body).count('"cache_control"') == 2  # within Anthropic's four
    assert "cache_control" not in json.dumps(CONVERSATION)  # the request itself is left as it was
    # and back: the Anthropic request reads as the same neutral conversation
    back = from_anthropic_request(body)
    assert back.messages == CONVERSATION
    assert back.tools == (TOOL,)


def test_anthropic_usage_is_normalised_to_include_cache():
    data = {
        "content": [
            {"type": "text", "text": "hi "},
            {"type": "tool_use", "id": "t1", "name": "finish", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 100,
            "output_tokens": 7,
            "cache_read_input_tokens": 900,
            "cache_creation_input_tokens": 50,
        },
    }
    r = anthropic_response(data, "claude-x")
    assert r.usage == Usage(input_tokens=1050, output_tokens=7, cached_input_tokens=900, cache_write_tokens=50)
    assert r.finish_reason == "tool_calls"
    assert r.content == "hi "
    assert json.loads(r.tool_calls[0].arguments) == {"a": 1}
    again = to_anthropic_response(r, message_id="msg_1")
    assert again["usage"] == data["usage"]
    assert again["stop_reason"] == "tool_use"


async def test_anthropic_over_http(scripted):
    reply = {
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    scripted.replies.append((200, reply, {}))
    p = AnthropicProvider(api_key=KEY, base_url=scripted.base_url, transport=scripted.transport)
    try:
        r = await p.complete(ChatRequest(model="claude-sonnet-4-5", messages=CONVERSATION[:2]))
    finally:
        await p.aclose()
    assert scripted.seen[0]["path"] == "/v1/messages"
    assert scripted.headers[0]["x-api-key"] == KEY
    assert scripted.headers[0]["anthropic-version"] == "2023-06-01"
    assert r.content == "done" and r.finish_reason == "stop" and r.usage.total_tokens == 12


@pytest.mark.parametrize(
    "body",
    ["<html><body>Sign in</body></html>", {"object": "list", "data": []}, {"choices": []}, {"choices": "x"}],
)
async def test_a_200_that_is_not_a_chat_completion_is_a_provider_error(scripted, body):
    scripted.replies.append((200, body, {}))
    p = OpenAIProvider(api_key=KEY, base_url=scripted.base_url, transport=scripted.transport)
    try:
        with pytest.raises(MalformedResponse) as info:
            await p.complete(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
    finally:
        await p.aclose()
    assert info.value.status == 200
    assert "127.0.0.1" in str(info.value) and "answered 200" in str(info.value)


@pytest.mark.parametrize(
    ("status", "body", "headers", "expected", "retry_after"),
    [
        (
            429,
            {"error": {"type": "requests", "code": "rate_limit_exceeded", "message": "slow"}},
            {"retry-after": "7"},
            RateLimited,
            7.0,
        ),
        (429, {"error": {"type": "rate_limit_error", "message": "x"}}, {"retry-after-ms": "1500"}, RateLimited, 1.5),
        (
            429,
            {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}},
            {},
            QuotaExhausted,
            None,
        ),
        (
            400,
            {"type": "error", "error": {"type": "invalid_request_error", "message": "Your credit balance is too low"}},
            {},
            QuotaExhausted,
            None,
        ),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}, Overloaded, None),
        (503, {"error": {"type": "server_is_overloaded", "message": "busy"}}, {"retry-after": "2"}, Overloaded, 2.0),
        (500, "not json at all", {}, Overloaded, None),
        (400, {"error": {"type": "invalid_request_error", "message": "bad tool schema"}}, {}, ClientRequestError, None),
        (401, {"error": {"type": "authentication_error", "message": f"bad key {KEY}"}}, {}, ProviderAuthError, None),
        (403, {"error": {"type": "permission_error", "message": "not allowed"}}, {}, ProviderAuthError, None),
        (403, {"error": {"type": "permission_error", "message": "billing is not set up"}}, {}, QuotaExhausted, None),
        (
            404,
            {"error": {"code": "model_not_found", "message": "The model `x` does not exist"}},
            {},
            ModelNotFound,
            None,
        ),
        (404, {"type": "error", "error": {"type": "not_found_error", "message": "model: x"}}, {}, ModelNotFound, None),
        (400, {"error": {"message": "The model `x` does not exist."}}, {}, ModelNotFound, None),
        (404, {"error": {"message": "no such route"}}, {}, ClientRequestError, None),
    ],
)
async def test_error_mapping(scripted, status, body, headers, expected, retry_after):
    scripted.replies.append((status, body, headers))
    p = OpenAIProvider(api_key=KEY, base_url=scripted.base_url, transport=scripted.transport)
    try:
        with pytest.raises(expected) as info:
            await p.complete(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
    finally:
        await p.aclose()
    err = info.value
    assert type(err) is expected
    assert err.status == status
    assert err.retry_after == retry_after
    assert "127.0.0.1" in str(err)
    assert KEY not in str(err) and KEY not in repr(err)


async def test_rate_limit_headers_reach_the_sink(scripted):
    seen = []
    scripted.replies.append(
        (
            200,
            openai_ok(),
            {
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "499",
                "x-ratelimit-reset-requests": "120ms",
                "x-ratelimit-limit-tokens": "100000",
                "x-ratelimit-remaining-tokens": "93000",
                "x-ratelimit-reset-tokens": "6m0s",
            },
        )
    )
    p = OpenAIProvider(
        api_key=KEY,
        base_url=scripted.base_url,
        transport=scripted.transport,
        on_signals=lambda m, s: seen.append((m, s)),
    )
    try:
        await p.complete(ChatRequest(model="gpt-x", messages=[{"role": "user", "content": "hi"}]))
    finally:
        await p.aclose()
    ((model, s),) = seen
    assert model == "gpt-x"
    assert (s.limit_requests, s.remaining_requests, s.reset_requests) == (500, 499, 0.12)
    assert (s.limit_tokens, s.remaining_tokens, s.reset_tokens) == (100000, 93000, 360.0)


def test_parse_duration():
    assert parse_duration("1s") == 1.0
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("12ms") == 0.012
    assert parse_duration("1h2m3.5s") == 3723.5
    assert parse_duration("2.5") == 2.5
    assert parse_duration("soon") is None


def test_credentials_and_base_url_resolution():
    env = {"OPENAI_API_KEY": "o-key", "ANTHROPIC_API_KEY": "a-key"}
    assert resolve_api_key("openai", env) == "o-key"
    assert resolve_api_key("anthropic", env) == "a-key"
    assert resolve_api_key("anthropic", {**env, "FLEET_API_KEY": "f-key"}) == "f-key"
    with pytest.raises(ConfigError) as info:
        resolve_api_key("openai", {})
    assert "FLEET_API_KEY" in str(info.value)
    assert resolve_api_key("openai", {}, base_url="http://127.0.0.1:9/v1") == "local"
    assert resolve_base_url("openai", {"FLEET_BASE_URL": "http://x/v1"}) == "http://x/v1"
    assert resolve_base_url("http://y/v1", {"FLEET_BASE_URL": "http://x/v1"}) == "http://y/v1"
    with pytest.raises(ConfigError):
        resolve_base_url("ftp://nope", {})


async def test_build_provider_picks_the_wire_format():
    a = build_provider("anthropic", api_key=KEY)
    b = build_provider("http://127.0.0.1:9/v1", model="claude-opus-4-5", env={})
    c = build_provider("http://127.0.0.1:9/v1", model="gpt-4.1", env={"FLEET_API_KEY": KEY})
    try:
        assert isinstance(a, AnthropicProvider) and a.base_url == "https://api.anthropic.com/v1"
        assert isinstance(b, AnthropicProvider) and b.base_url == "http://127.0.0.1:9/v1"
        assert isinstance(c, OpenAIProvider) and c.model == "gpt-4.1"
        assert KEY not in repr(a) and KEY not in repr(c)
    finally:
        for p in (a, b, c):
            await p.aclose()


async def test_a_wide_integer_in_a_tool_input_reaches_the_conversation_exactly(scripted):
    """An Anthropic tool input is the model's own JSON: read exactly (orjson would make 2**70 + 1 a float),
    and sent back exactly on the next request (orjson refuses it; json writes it)."""
    wide = 2**70 + 1
    reply = {
        "model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py", "line": wide}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    scripted.replies.append((200, reply, {}))
    scripted.replies.append((200, {**reply, "content": [{"type": "text", "text": "ok"}]}, {}))
    p = AnthropicProvider(api_key=KEY, base_url=scripted.base_url, transport=scripted.transport)
    try:
        r = await p.complete(ChatRequest(model="claude-sonnet-4-5", messages=CONVERSATION[:2], tools=(TOOL,)))
        (call,) = r.tool_calls
        assert json.loads(call.arguments) == {"path": "a.py", "line": wide}
        follow = [*CONVERSATION[:2], r.assistant_message(), {"role": "tool", "tool_call_id": "t1", "content": "x"}]
        await p.complete(ChatRequest(model="claude-sonnet-4-5", messages=follow, tools=(TOOL,)))
    finally:
        await p.aclose()
    sent = scripted.seen[1]["body"]["messages"][1]["content"][0]
    assert sent["type"] == "tool_use" and sent["input"] == {"path": "a.py", "line": wide}


@pytest.mark.parametrize(
    ("failure", "expected", "sent"),
    [
        (TransportError("ConnectionRefusedError", sent=False), ProviderUnreachable, False),
        (TransportError("ServerDisconnectedError", sent=True), ProviderUnreachable, True),
        (TransportError("TimeoutError", sent=True, timed_out=True), ProviderTimeout, True),
    ],
)
async def test_no_answer_from_the_transport_names_the_host_and_whether_it_was_sent(
    failure: TransportError, expected: type[Exception], sent: bool
) -> None:
    def refuse(request: MockRequest) -> Answer:
        raise failure

    p = OpenAIProvider(api_key=KEY, base_url="http://127.0.0.1:9/v1", transport=MockTransport(refuse))
    with pytest.raises(ProviderUnreachable) as info:
        await p.complete(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
    await p.aclose()
    assert type(info.value) is expected
    assert info.value.sent is sent  # type: ignore[attr-defined]
    assert "127.0.0.1:9" in str(info.value) and failure.cause in str(info.value) and KEY not in str(info.value)


async def test_the_provider_builds_its_transport_from_its_endpoint_and_closes_it() -> None:
    mock = MockTransport(lambda request: Answer(200, {}, json.dumps(openai_ok()).encode()))
    p = OpenAIProvider(api_key=KEY, base_url="http://127.0.0.1:9/v1/", transport=mock, timeout=7.0, max_connections=3)
    assert p.transport is mock and mock.endpoint is not None
    assert (mock.endpoint.base_url, mock.endpoint.timeout, mock.endpoint.max_connections) == (
        "http://127.0.0.1:9/v1",
        7.0,
        3,
    )
    assert mock.endpoint.headers["authorization"] == f"Bearer {KEY}"
    await p.aclose()
    assert mock.closed


async def test_the_pass_through_keeps_the_providers_credentials_and_maps_an_error_status() -> None:
    answers = [
        Answer(200, {"content-type": "text/event-stream"}, b"data: {}\n\n"),
        Answer(429, {"retry-after": "3"}, b'{"error": {"type": "rate_limit_error", "message": "slow"}}'),
    ]
    mock = MockTransport(lambda request: answers.pop(0))
    p = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9/v1", transport=mock)
    reply = await p.send_raw(b"{}", model="m", stream=True, headers={"x-api-key": "theirs", "x-trace": "t1"})
    assert [chunk async for chunk in reply.aiter_raw()] == [b"data: {}\n\n"]
    await reply.aclose()
    sent = mock.requests[0]
    assert (sent.path, sent.stream) == ("messages", True)
    assert sent.headers["x-api-key"] == KEY and sent.headers["x-trace"] == "t1"
    with pytest.raises(RateLimited) as info:
        await p.send_raw(b"{}", model="m", path="messages?beta=true")
    assert info.value.retry_after == 3.0 and mock.requests[1].path == "messages?beta=true"
    assert mock.requests[1].headers["x-api-key"] == KEY  # no headers of the client's: the provider's own
