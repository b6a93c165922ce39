"""The Responses API through the gateway service, driven by the official ``openai`` SDK.

Two paths, both against the simulated provider: passed through to an endpoint that serves
``/v1/responses`` itself (``native``), and translated to chat completions for one that does not
(``translated``: vLLM, Ollama); plus a Responses client in front of an Anthropic route.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import AnthropicProvider, OpenAIProvider
from agent_fleet.spend.service import GatewayService, SessionTokens

KEY = "sk-responses-SECRET-5d1e"
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "submit_result",
        "description": "Report findings",
        "parameters": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "object"}}},
            "required": ["items"],
        },
    },
    {
        "type": "function",
        "name": "finish",
        "description": "End the session",
        "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}},
    },
]
TASK = "Task: review each item\nItems:\nalpha\nbeta"
# model asked for -> (path the provider saw, how it got there)
PATHS = {"gpt-4.1": "/v1/responses", "gpt-4.1-mini": "/v1/chat/completions"}


class Stack:
    def __init__(self, sim: SimProvider, service: GatewayService) -> None:
        self.sim = sim
        self.service = service
        self.gateway = service.gateway
        self.clients: list[openai.AsyncOpenAI] = []

    def client(self, session_id: str) -> openai.AsyncOpenAI:
        c = openai.AsyncOpenAI(
            base_url=self.service.root_url + "/v1", api_key=self.service.issue(session_id), max_retries=0
        )
        self.clients.append(c)
        return c

    def paths(self) -> list[str]:
        assert self.sim.received is not None
        return [r.path for r in self.sim.received]


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with SimProvider(SimConfig(reject_unknown_models=True), record=50) as sim:
        chat_only = OpenAIProvider(api_key=KEY, base_url=sim.base_url, model="gpt-4.1-mini", responses_api=False)
        native = OpenAIProvider(api_key=KEY, base_url=sim.base_url, model="gpt-4.1", name="native", responses_api=True)
        claude = AnthropicProvider(api_key=KEY, base_url=sim.base_url, model="claude-sonnet-4-5")
        gateway = Gateway(chat_only, routes={"gpt-4.1": native, "claude-sonnet-4-5": claude}, session_tokens=50_000)
        service = GatewayService(gateway, tokens=SessionTokens(b"r" * 32))
        await service.start()
        s = Stack(sim, service)
        try:
            yield s
        finally:
            for c in s.clients:
                await c.close()
            await service.aclose()
            await gateway.aclose()


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-4.1-mini"])
async def test_plain_response_is_metered(stack: Stack, model: str) -> None:
    client = stack.client("s-plain")
    r = await client.responses.create(model=model, instructions="You are brief.", input="Task: say hello")
    assert stack.paths() == [PATHS[model]]
    assert r.status == "completed" and r.model == model
    assert "Task: say hello" in r.output_text
    assert r.usage is not None and r.usage.input_tokens > 0
    tally = stack.gateway.session_usage("s-plain")
    assert (tally.calls, tally.input_tokens, tally.output_tokens) == (1, r.usage.input_tokens, r.usage.output_tokens)
    assert tally.cost_usd > 0
    assert stack.gateway.statistics().open_reservations == 0


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-4.1-mini"])
async def test_streamed_response_events_and_usage(stack: Stack, model: str) -> None:
    client = stack.client("s-stream")
    stream = await client.responses.create(model=model, input="Task: say hello", stream=True)
    events = [e async for e in stream]
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response  # type: ignore[union-attr]
    assert text and text == final.output_text
    assert "response.output_item.done" in kinds and "response.content_part.done" in kinds
    tally = stack.gateway.session_usage("s-stream")
    assert final.usage is not None
    assert (tally.input_tokens, tally.output_tokens) == (final.usage.input_tokens, final.usage.output_tokens)
    assert stack.paths() == [PATHS[model]]


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-4.1-mini"])
async def test_tool_calls_and_their_outputs_round_trip(stack: Stack, model: str) -> None:
    client = stack.client("s-tools")
    first = await client.responses.create(model=model, input=TASK, tools=TOOLS)
    calls = [o for o in first.output if o.type == "function_call"]
    assert [c.name for c in calls] == ["submit_result"]
    items = json.loads(calls[0].arguments)["items"]
    assert ['"alpha"' in i["body"] for i in items] == [True, False] and '"beta"' in items[1]["body"]
    history: list[Any] = [{"role": "user", "content": TASK}]
    history += [
        {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments} for c in calls
    ]
    history += [{"type": "function_call_output", "call_id": c.call_id, "output": "accepted"} for c in calls]
    stream = await client.responses.create(model=model, input=history, tools=TOOLS, stream=True)
    events = [e async for e in stream]
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.output_item.done"]
    final = events[-1].response  # type: ignore[union-attr]
    assert [o.name for o in final.output if o.type == "function_call"] == ["finish"]
    assert deltas == done[-1].item.arguments  # type: ignore[union-attr]
    assert json.loads(deltas)["summary"]
    assert stack.gateway.session_usage("s-tools").calls == 2
    assert stack.paths() == [PATHS[model]] * 2


async def test_a_responses_client_in_front_of_an_anthropic_route(stack: Stack) -> None:
    client = stack.client("s-claude")
    r = await client.responses.create(model="claude-sonnet-4-5", input=TASK, tools=TOOLS)
    assert [o.name for o in r.output if o.type == "function_call"] == ["submit_result"]
    stream = await client.responses.create(model="claude-sonnet-4-5", input="Task: say hello", stream=True)
    events = [e async for e in stream]
    final = events[-1].response  # type: ignore[union-attr]
    assert events[-1].type == "response.completed" and final.output_text
    assert stack.paths() == ["/v1/messages", "/v1/messages"]
    tally = stack.gateway.session_usage("s-claude")
    assert tally.calls == 2 and final.usage is not None and tally.output_tokens > final.usage.output_tokens


async def test_budget_refusal_and_a_stateful_request_in_the_responses_format(stack: Stack) -> None:
    client = stack.client("s-refused")
    stack.gateway.set_session_budget("s-refused", tokens=0)
    with pytest.raises(openai.APIStatusError) as refused:
        await client.responses.create(model="gpt-4.1-mini", input="Task: hi")
    assert refused.value.status_code == 402 and refused.value.code == "budget_exceeded"
    other = stack.client("s-stateful")
    with pytest.raises(openai.BadRequestError) as stateful:
        await other.responses.create(model="gpt-4.1-mini", input="Task: hi", previous_response_id="resp_1")
    assert "previous_response_id" in str(stateful.value)
    assert stack.paths() == []  # neither reached the provider
    assert stack.gateway.statistics().open_reservations == 0
