"""What the gateway service passes through, substitutes and refuses, seen from the provider's side.

The simulated provider records each request as it arrived (headers, query, body), so every test can
say exactly what the client's request became on the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import AnthropicProvider, OpenAIProvider
from agent_fleet.spend.retry import RetryPolicy
from agent_fleet.spend.service import GatewayService, SessionTokens

KEY = "sk-passthrough-SECRET-0b7c"
BETAS = ["context-management-2025-06-27", "fine-grained-tool-streaming-2025-05-14", "interleaved-thinking-2025-05-14"]
READ = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    "defer_loading": True,
}
USER = [{"role": "user", "content": "Task: say hello"}]


class Stack:
    def __init__(self, sim: SimProvider, service: GatewayService, routes: list[tuple[str, dict[str, str]]]) -> None:
        self.sim = sim
        self.service = service
        self.gateway = service.gateway
        self.routes = routes
        self.clients: list[Any] = []

    def openai(self, session_id: str, **kw: Any) -> openai.AsyncOpenAI:
        kw.setdefault("max_retries", 0)
        c = openai.AsyncOpenAI(base_url=self.service.root_url + "/v1", api_key=self.service.issue(session_id), **kw)
        self.clients.append(c)
        return c

    def anthropic(self, session_id: str, **kw: Any) -> anthropic.AsyncAnthropic:
        kw.setdefault("max_retries", 0)
        c = anthropic.AsyncAnthropic(base_url=self.service.root_url, api_key=self.service.issue(session_id), **kw)
        self.clients.append(c)
        return c

    def last(self) -> Any:
        assert self.sim.received
        return self.sim.received[-1]


async def make_stack(config: SimConfig, **gateway_kw: Any) -> tuple[Stack, Gateway]:
    sim = SimProvider(config, record=20)
    await sim.start()
    default = OpenAIProvider(api_key=KEY, base_url=sim.base_url, model="gpt-4.1-mini")
    claude = AnthropicProvider(api_key=KEY, base_url=sim.base_url, model="claude-sonnet-4-5")
    gateway_kw.setdefault("model_aliases", {"claude-opus-5-5": "claude-sonnet-4-5", "fast-*": "gpt-4.1-mini"})
    gateway = Gateway(default, routes={"claude-sonnet-4-5": claude}, **gateway_kw)
    routes: list[tuple[str, dict[str, str]]] = []
    gateway.on_route = lambda sid, route: routes.append((sid, route))
    service = GatewayService(gateway, tokens=SessionTokens(b"p" * 32))
    await service.start()
    return Stack(sim, service, routes), gateway


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    s, gateway = await make_stack(SimConfig(reject_unknown_models=True))
    try:
        yield s
    finally:
        for c in s.clients:
            await c.close()
        await s.service.aclose()
        await gateway.aclose()
        await s.sim.stop()


async def test_betas_versions_and_beta_body_fields_reach_the_provider_as_sent(stack: Stack) -> None:
    client = stack.anthropic("s-beta")
    text = ""
    async with client.beta.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=128_000,
        betas=BETAS,
        system=[{"type": "text", "text": "You review code.", "cache_control": {"type": "ephemeral"}}],
        messages=USER,
        tools=[READ],  # type: ignore[list-item]
        extra_body={
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "output_config": {"effort": "medium"},
        },
        extra_headers={"x-app": "cli", "anthropic-version": "2023-06-01"},
        extra_query={"beta": "true"},  # as Claude Code's own client sends it
    ) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
        final = await stream.get_final_message()
    got = stack.last()
    assert got.path == "/v1/messages" and got.query == "beta=true"
    assert got.headers["anthropic-beta"].split(",") == BETAS
    assert got.headers["anthropic-version"] == "2023-06-01" and got.headers["x-app"] == "cli"
    assert got.headers["x-api-key"] == KEY  # the provider's key, never the session's token
    assert got.body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert got.body["output_config"] == {"effort": "medium"}
    assert got.body["tools"] == [READ] and got.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert got.body["max_tokens"] == 128_000 and got.body["model"] == "claude-sonnet-4-5"  # routed, not substituted
    assert text and final.content[0].text == text  # type: ignore[union-attr]
    tally = stack.gateway.session_usage("s-beta")
    assert tally.output_tokens == final.usage.output_tokens and stack.routes == []


async def test_no_output_limit_is_added_and_max_completion_tokens_is_honoured(stack: Stack) -> None:
    client = stack.openai("s-limits")
    await client.chat.completions.create(model="gpt-4.1-mini", messages=USER)  # type: ignore[arg-type]
    assert "max_tokens" not in stack.last().body and "max_completion_tokens" not in stack.last().body
    await client.chat.completions.create(model="gpt-4.1-mini", messages=USER, max_completion_tokens=777)  # type: ignore[arg-type]
    assert stack.last().body["max_completion_tokens"] == 777 and "max_tokens" not in stack.last().body
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4.1-mini", messages=USER)  # type: ignore[arg-type]
    assert raw.headers["x-ratelimit-limit-requests"]  # the provider's headers come back to the client
    assert raw.headers["x-request-id"].startswith("req_sim")


async def test_a_routed_substitution_is_an_event_and_clamps_the_limit(stack: Stack) -> None:
    client = stack.anthropic("s-alias")
    msg = await client.messages.create(model="claude-opus-5-5", max_tokens=128_000, messages=USER, timeout=60)  # type: ignore[arg-type]
    got = stack.last()
    assert (got.body["model"], got.body["max_tokens"]) == ("claude-sonnet-4-5", 64_000)  # its output limit
    assert msg.model == "claude-sonnet-4-5"
    assert stack.routes == [
        (
            "s-alias",
            {
                "model": "claude-sonnet-4-5",
                "name": "claude-opus-5-5",
                "tier": "",
                "reason": "asked for claude-opus-5-5: alias claude-opus-5-5 -> claude-sonnet-4-5",
            },
        )
    ]
    oa = stack.openai("s-alias")
    r = await oa.chat.completions.create(model="fast-anything", messages=USER, max_tokens=900_000)  # type: ignore[arg-type]
    assert r.model == "gpt-4.1-mini" and stack.last().body["max_tokens"] == 32_768
    assert [name for _, route in stack.routes for name in (route["name"],)] == ["claude-opus-5-5", "fast-anything"]


async def test_an_unrouted_model_the_provider_lacks_is_an_error_in_the_clients_format(stack: Stack) -> None:
    claude = stack.anthropic("s-lost")
    with pytest.raises(anthropic.NotFoundError) as a:
        await claude.messages.create(model="claude-opus-9", max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert "claude-opus-9" in str(a.value) and "aliases:" in str(a.value)
    assert a.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    oa = stack.openai("s-lost")
    with pytest.raises(openai.NotFoundError) as o:
        await oa.chat.completions.create(model="gpt-9", messages=USER)  # type: ignore[arg-type]
    assert o.value.code == "model_not_found" and "gpt-9" in str(o.value)
    assert [r.body["model"] for r in stack.sim.received] == ["claude-opus-9", "gpt-9"]  # asked as they were
    assert stack.gateway.session_usage("s-lost").calls == 0 and stack.routes == []


async def test_budget_refusals_are_typed_by_both_sdks_and_never_retried(stack: Stack) -> None:
    stack.gateway.set_session_budget("s-broke", tokens=0)
    claude = stack.anthropic("s-broke", max_retries=3)
    with pytest.raises(anthropic.PaymentRequiredError) as a:
        await claude.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert a.value.response.headers["x-should-retry"] == "false"
    oa = stack.openai("s-broke", max_retries=3)
    with pytest.raises(openai.APIStatusError) as o:
        await oa.chat.completions.create(model="gpt-4.1-mini", messages=USER)  # type: ignore[arg-type]
    assert (o.value.status_code, o.value.code) == (402, "budget_exceeded")
    assert stack.service.requests["budget_exhausted"] == 2  # one request each: neither SDK retried
    assert not stack.sim.received


async def test_a_429_is_passed_on_with_its_retry_after_once_to_a_client_that_retries_itself() -> None:
    s, gateway = await make_stack(SimConfig(rate_429=1.0), retry=RetryPolicy(max_attempts=3, base_delay_s=0.01))
    try:
        client = s.openai("s-429")
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="gpt-4.1-mini", messages=USER)  # type: ignore[arg-type]
        assert info.value.response.headers["retry-after"] == "1"
        assert len(s.sim.received) == 1  # the SDK says it retries (x-stainless-retry-count): sent once
        async with httpx.AsyncClient() as http:  # a client that does not: the gateway retries for it
            r = await http.post(
                s.service.root_url + "/v1/chat/completions",
                json={"model": "gpt-4.1-mini", "messages": USER},
                headers={"Authorization": f"Bearer {s.service.issue('s-curl')}"},
                timeout=30,
            )
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert len(s.sim.received) == 1 + 3
    finally:
        for c in s.clients:
            await c.close()
        await s.service.aclose()
        await gateway.aclose()
        await s.sim.stop()


async def test_a_client_that_hangs_up_is_dropped_while_queued_and_cancelled_on_the_wire() -> None:
    s, gateway = await make_stack(SimConfig(latency=2.0), concurrency=1, adaptive=False)
    url = s.service.root_url + "/v1/chat/completions"

    def body(n: int) -> dict[str, Any]:
        return {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": f"Task: {n}"}], "max_tokens": 50}

    async def post(session: str, n: int, timeout: float) -> int | str:
        async with httpx.AsyncClient() as http:
            try:
                token = s.service.issue(session)
                r = await http.post(url, json=body(n), headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
            except httpx.TimeoutException:
                return "hung up"
            return r.status_code

    try:
        first = asyncio.ensure_future(post("s-first", 1, 30))
        await asyncio.sleep(0.3)  # the first holds the one permit for 2 s
        assert await post("s-queued", 2, 0.4) == "hung up"
        await asyncio.sleep(0.2)
        stats = gateway.statistics()
        assert stats.concurrency.tasks_waiting == 0 and stats.in_flight == 1  # the queued one is gone
        assert await first == 200
        await asyncio.sleep(0.5)
        assert [r.body["messages"][0]["content"] for r in s.sim.received] == ["Task: 1"]  # it never went out
        assert gateway.session_usage("s-queued").calls == 0
        assert gateway.session_budget("s-queued")["spent_tokens"] == 0
        assert await post("s-cut", 3, 0.5) == "hung up"  # on the wire this time
        await asyncio.sleep(0.3)
        assert gateway.statistics().in_flight == 0  # cancelled well before the provider's 2 s answer
        assert gateway.session_budget("s-cut")["spent_tokens"] > 50  # its reservation: prompt + max_tokens
        assert s.service.requests["cancelled"] == 2
    finally:
        await s.service.aclose()
        await gateway.aclose()
        await s.sim.stop()


async def test_the_session_token_never_reaches_the_provider(stack: Stack) -> None:
    token = stack.service.issue("s-token")
    async with httpx.AsyncClient() as http:
        r = await http.post(
            stack.service.root_url + "/v1/messages",
            json={"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": USER},
            headers={"x-api-key": token, "authorization": f"Bearer {token}", "cookie": "a=b", "x-trace": "t-1"},
        )
    assert r.status_code == 200
    seen = json.dumps(stack.last().headers).lower()
    assert token.lower() not in seen and "cookie" not in seen
    assert stack.last().headers["x-trace"] == "t-1"


async def test_strict_budgets_lower_the_limit_the_client_sent_or_set_one() -> None:
    s, gateway = await make_stack(SimConfig(), budget_mode="strict", strict_floor=10, session_tokens=3_000)
    url = s.service.root_url + "/v1/chat/completions"
    try:
        async with httpx.AsyncClient() as http:
            for session, extra in (("s-capped", {"max_completion_tokens": 100_000}), ("s-open", {})):
                raw = json.dumps({"model": "gpt-4.1-mini", "messages": USER, **extra}).encode()
                headers = {"Authorization": f"Bearer {s.service.issue(session)}", "content-type": "application/json"}
                # the gateway's estimate of a body this size (calibrated by the calls before it)
                prompt = gateway.estimator.estimate_raw("gpt-4.1-mini#http", len(raw) // 3 + 16)
                r = await http.post(url, content=raw, headers=headers)
                assert r.status_code == 200
                field = "max_completion_tokens" if extra else "max_tokens"  # the client's own, else the provider's
                assert s.last().body[field] == 3_000 - prompt
                assert ("max_tokens" in s.last().body) == (not extra)
    finally:
        await s.service.aclose()
        await gateway.aclose()
        await s.sim.stop()


async def test_a_stream_is_charged_and_recorded_before_the_client_has_its_last_event() -> None:
    """A CLI agent exits as soon as it reads a stream's last event and hangs up. The call must by then
    be charged its real usage (not its reservation, as a cut stream) and told to the observer that
    writes it into the session log; otherwise the session's bill misses it, or counts it as cut."""
    s, gateway = await make_stack(SimConfig(latency=0.05))
    recorded: list[dict[str, Any]] = []

    async def observer(session_id: str, outcome: dict[str, Any]) -> None:
        await asyncio.sleep(0.2)  # a slow store write
        recorded.append({"session": session_id, **outcome})

    s.service.on_call = observer
    url = s.service.root_url + "/v1/chat/completions"
    body = {"model": "gpt-4.1-mini", "messages": USER, "max_tokens": 5000, "stream": True}
    headers = {"Authorization": f"Bearer {s.service.issue('s-exits')}"}
    recorded_when_done: list[int] = []
    try:
        async with httpx.AsyncClient() as http, http.stream("POST", url, json=body, headers=headers) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.strip() == "data: [DONE]":
                    recorded_when_done.append(len(recorded))
                    break  # and hang up at once, as the CLI does
        await asyncio.sleep(0.5)
        assert recorded_when_done == [1]  # recorded before the client read the last event
        assert [(r["session"], r["outcome"]) for r in recorded] == [("s-exits", "ok")]  # once, not as cut
        bill = s.sim.stats()
        usage = gateway.session_usage("s-exits")
        assert usage.calls == 1
        # the provider's bill, not prompt + max_tokens
        assert (usage.input_tokens, usage.output_tokens) == (bill["tokens_in"], bill["tokens_out"])
        assert 0 < usage.output_tokens < 5000
    finally:
        await s.service.aclose()
        await gateway.aclose()
        await s.sim.stop()
