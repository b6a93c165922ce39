"""The gateway as an HTTP service, driven by the official OpenAI and Anthropic SDKs.

Upstream is the simulated provider on loopback; the gateway holds the only provider key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import AnthropicProvider, OpenAIProvider
from agent_fleet.spend.service import GatewayService, SessionTokens

PROVIDER_KEY = "sk-provider-SECRET-7f3a9c"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "finish",
            "description": "End the session",
            "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}},
        },
    }
]
MESSAGES = [{"role": "system", "content": "You review code."}, {"role": "user", "content": "Task: say hello"}]


class Stack:
    def __init__(self, sim: SimProvider, service: GatewayService, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.sim = sim
        self.service = service
        self.gateway = service.gateway
        self.calls = calls
        self.clients: list[Any] = []

    def openai(self, session_id: str, *, key: str | None = None) -> openai.AsyncOpenAI:
        token = key or self.service.issue(session_id)
        client = openai.AsyncOpenAI(base_url=self.service.root_url + "/v1", api_key=token, max_retries=0)
        self.clients.append(client)
        return client

    def anthropic(self, session_id: str) -> anthropic.AsyncAnthropic:
        token = self.service.issue(session_id)
        client = anthropic.AsyncAnthropic(base_url=self.service.root_url, api_key=token, max_retries=0)
        self.clients.append(client)
        return client


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with SimProvider(SimConfig(reject_unknown_models=True)) as sim:
        default = OpenAIProvider(api_key=PROVIDER_KEY, base_url=sim.base_url, model="gpt-4.1-mini")
        claude = AnthropicProvider(api_key=PROVIDER_KEY, base_url=sim.base_url, model="claude-sonnet-4-5")
        gateway = Gateway(
            default,
            routes={"claude-sonnet-4-5": claude},
            model_aliases={"claude-haiku-*": "gpt-4.1-mini"},
            session_tokens=20_000,
        )
        calls: list[tuple[str, dict[str, Any]]] = []

        async def observe(session_id: str, outcome: dict[str, Any]) -> None:
            calls.append((session_id, outcome))

        service = GatewayService(gateway, tokens=SessionTokens(b"k" * 32), on_call=observe)
        await service.start()
        s = Stack(sim, service, calls)
        try:
            yield s
        finally:
            for client in s.clients:
                await client.close()
            await service.aclose()
            await gateway.aclose()


async def test_openai_sdk_plain_call_is_metered(stack: Stack) -> None:
    client = stack.openai("s-1")
    r = await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, tools=TOOLS, max_tokens=300)
    assert r.model == "gpt-4.1-mini"
    assert r.usage is not None and r.usage.prompt_tokens > 0
    tally = stack.gateway.session_usage("s-1")
    assert tally.calls == 1
    assert tally.input_tokens == r.usage.prompt_tokens
    assert tally.output_tokens == r.usage.completion_tokens
    assert tally.cost_usd > 0
    assert stack.calls[-1][0] == "s-1" and stack.calls[-1][1]["outcome"] == "ok"
    assert stack.gateway.statistics().open_reservations == 0


async def test_openai_paths_also_answer_on_the_root(stack: Stack) -> None:
    # A client configured with the gateway's root URL (no /v1) reaches the same endpoints.
    token = stack.service.issue("s-root")
    client = openai.AsyncOpenAI(base_url=stack.service.root_url, api_key=token, max_retries=0)
    stack.clients.append(client)
    chat = await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=50)
    answer = await client.responses.create(model="gpt-4.1-mini", input="Task: say hello", max_output_tokens=50)
    vectors = await client.embeddings.create(model="text-embedding-3-small", input=["a", "b"])
    assert chat.choices[0].message.content and answer.output_text and len(vectors.data) == 2
    assert stack.gateway.session_usage("s-root").calls == 3
    assert [outcome["outcome"] for sid, outcome in stack.calls if sid == "s-root"] == ["ok", "ok", "ok"]


async def test_openai_sdk_stream_meters_usage_it_did_not_ask_for(stack: Stack) -> None:
    client = stack.openai("s-2")
    stream = await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=200, stream=True)
    chunks = [c async for c in stream]
    assert chunks and all(c.choices for c in chunks)  # the usage-only chunk it did not ask for is dropped
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text
    tally = stack.gateway.session_usage("s-2")
    assert tally.calls == 1 and tally.input_tokens > 0 and tally.output_tokens > 0
    assert stack.gateway.statistics().open_reservations == 0


async def test_openai_sdk_stream_with_usage(stack: Stack) -> None:
    client = stack.openai("s-3")
    stream = await client.chat.completions.create(
        model="gpt-4.1-mini", messages=MESSAGES, max_tokens=200, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    usage = chunks[-1].usage
    assert usage is not None
    tally = stack.gateway.session_usage("s-3")
    assert (tally.input_tokens, tally.output_tokens) == (usage.prompt_tokens, usage.completion_tokens)


async def test_anthropic_sdk_passes_through_to_an_anthropic_route(stack: Stack) -> None:
    client = stack.anthropic("s-4")
    msg = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=300, system="You review code.", messages=[MESSAGES[1]]
    )
    assert msg.model == "claude-sonnet-4-5"
    tally = stack.gateway.session_usage("s-4")
    assert tally.input_tokens == msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0)
    async with client.messages.stream(model="claude-sonnet-4-5", max_tokens=300, messages=[MESSAGES[1]]) as stream:
        final = await stream.get_final_message()
    assert final.usage.output_tokens > 0
    assert stack.gateway.session_usage("s-4").calls == 2
    assert stack.gateway.meter.models["claude-sonnet-4-5"].calls == 2


async def test_anthropic_sdk_translated_to_an_openai_provider_through_an_alias(stack: Stack) -> None:
    client = stack.anthropic("s-5")
    tools = [{"name": "finish", "description": "End", "input_schema": {"type": "object", "properties": {}}}]
    msg = await client.messages.create(model="claude-haiku-x", max_tokens=300, messages=[MESSAGES[1]], tools=tools)
    assert msg.model == "gpt-4.1-mini"
    assert stack.calls[-1][1]["asked"] == "claude-haiku-x"  # the substitution is in the call's record
    assert stack.calls[-1][1]["route"] == "alias claude-haiku-* -> gpt-4.1-mini"
    assert msg.usage.input_tokens > 0
    async with client.messages.stream(model="claude-haiku-x", max_tokens=300, messages=[MESSAGES[1]]) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason in ("end_turn", "tool_use")
    assert stack.gateway.session_usage("s-5").calls == 2


async def test_bad_tokens_are_refused(stack: Stack) -> None:
    forged = stack.openai("", key="fgw-czE.0000")
    with pytest.raises(openai.AuthenticationError) as refused:
        await forged.chat.completions.create(model="m", messages=MESSAGES)
    # not to be retried: clients that honour it (the SDKs, Claude Code) give up at once
    assert refused.value.response.headers.get("x-should-retry") == "false"
    provider_key = stack.openai("", key=PROVIDER_KEY)
    with pytest.raises(openai.AuthenticationError):
        await provider_key.chat.completions.create(model="m", messages=MESSAGES)
    stack.service.tokens.revoke("s-6")
    token = stack.service.tokens.issue("s-6")
    assert stack.service.tokens.verify(token) == "s-6"
    stack.service.tokens.revoke("s-6")
    assert stack.service.tokens.verify(token) is None


async def test_budget_stops_an_external_client_and_a_raise_resumes_it(stack: Stack) -> None:
    client = stack.openai("s-7")
    stack.gateway.set_session_budget("s-7", tokens=3_000)
    await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=1_000)
    await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=2_950)  # budget left
    stack.gateway.set_session_budget("s-7", tokens=stack.gateway.session_budget("s-7")["spent_tokens"])
    with pytest.raises(openai.APIStatusError) as info:
        await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=2_950)
    assert info.value.status_code == 402
    assert info.value.code == "budget_exceeded" and info.value.response.headers["x-should-retry"] == "false"
    assert "budget" in str(info.value)
    assert stack.calls[-1][1]["outcome"] == "budget_exhausted"
    async with httpx.AsyncClient() as http:
        headers = {"Authorization": f"Bearer {stack.service.admin_token}"}
        r = await http.post(
            stack.service.root_url + "/fleet/budget", json={"id": "s-7", "tokens": 50_000}, headers=headers
        )
        assert r.status_code == 200
        stats = (await http.get(stack.service.root_url + "/fleet/stats", headers=headers)).json()
        assert stats["open_reservations"] == 0
        denied = await http.get(stack.service.root_url + "/fleet/stats")
        assert denied.status_code == 401
    await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=2_950)
    assert stack.gateway.session_usage("s-7").calls == 3


async def test_provider_key_never_leaves_the_gateway(stack: Stack) -> None:
    client = stack.openai("s-8")
    await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, max_tokens=100)
    stack.gateway.set_session_budget("s-8", tokens=1)
    with pytest.raises(openai.APIStatusError) as info:
        await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES)
    texts = [
        str(info.value),
        repr(stack.gateway),
        repr(stack.service),
        json.dumps(stack.gateway.statistics().to_dict()),
    ]
    texts += [json.dumps(outcome) for _, outcome in stack.calls]
    assert all(PROVIDER_KEY not in t for t in texts)
    assert Decimal(stack.gateway.statistics().run["cost_usd"]) > 0


async def test_no_log_line_error_or_answer_carries_the_provider_key(caplog: pytest.LogCaptureFixture) -> None:
    """A provider that echoes the key it was sent, everything logged at DEBUG: the key shows up nowhere."""
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        sent = request.headers.get("Authorization", "")
        body = {"error": {"type": "invalid_request_error", "message": f"bad key {sent}"}}
        return web.json_response(body, status=400)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    caplog.set_level("DEBUG")
    provider = OpenAIProvider(api_key=PROVIDER_KEY, base_url=f"http://127.0.0.1:{port}/v1")
    gateway = Gateway(provider)
    outcomes: list[dict[str, Any]] = []

    async def observe(session_id: str, outcome: dict[str, Any]) -> None:
        outcomes.append(outcome)

    service = GatewayService(gateway, on_call=observe)
    await service.start()
    client = openai.AsyncOpenAI(base_url=service.root_url + "/v1", api_key=service.issue("s"), max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        from agent_fleet.domain.model import ChatRequest

        with pytest.raises(Exception) as direct:
            await gateway.complete("t", ChatRequest(model="m", messages=MESSAGES))
    finally:
        await client.close()
        await service.aclose()
        await gateway.aclose()
        await runner.cleanup()
    texts = [str(info.value), info.value.response.text, str(direct.value), repr(direct.value), caplog.text]
    texts += [json.dumps(o) for o in outcomes] + [json.dumps(gateway.statistics().to_dict())]
    assert "bad key" in info.value.response.text  # the provider's message came through, scrubbed
    assert all(PROVIDER_KEY not in t for t in texts)


async def test_a_stream_cut_by_the_client_is_charged_its_reservation() -> None:
    async with SimProvider(SimConfig(per_output_token_s=0.02)) as sim:
        provider = OpenAIProvider(api_key=PROVIDER_KEY, base_url=sim.base_url, model="gpt-4.1-mini")
        gateway = Gateway(provider)
        service = GatewayService(gateway)
        await service.start()
        try:
            token = service.issue("cut")
            body = {"model": "gpt-4.1-mini", "messages": MESSAGES, "max_tokens": 300, "stream": True}
            async with (
                httpx.AsyncClient() as http,
                http.stream(
                    "POST",
                    service.root_url + "/v1/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                ) as response,
            ):
                assert response.status_code == 200
                async for _ in response.aiter_raw():
                    break  # the client hangs up after the first bytes
            for _ in range(100):
                if gateway.statistics().in_flight == 0:
                    break
                await asyncio.sleep(0.05)
            stats = gateway.statistics()
            assert (stats.in_flight, stats.open_reservations, stats.concurrency.borrowed_tokens) == (0, 0, 0)
            budget = gateway.session_budget("cut")
            # never zero: the reservation (prompt estimate + max_tokens) is what a cut stream costs
            assert gateway.session_usage("cut").output_tokens == 300  # max_tokens, not what was streamed
            assert budget["spent_tokens"] > 300
            assert Decimal(budget["spent_usd"]) > 0
        finally:
            await service.aclose()
            await gateway.aclose()
