"""The official ``openai`` and ``anthropic`` SDKs against ``agent-fleet gateway`` — a real process, real
HTTP — with the simulated provider behind it: plain, streamed, tools, the Responses API (both paths),
a budget refusal raised as the SDK's typed error and not retried, a 429 passed on with its retry-after.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.testing.processes import stop_async

KEY = "sk-sdk-gateway-SECRET-93fa"
CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "submit_result",
            "description": "Report findings",
            "parameters": {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object"}}}},
        },
    }
]
TASK = "Task: classify each item\nItems:\nalpha\nbeta"


class Running:
    def __init__(self, info: dict[str, Any], sim: SimProvider, limited: SimProvider, stalled: SimProvider) -> None:
        self.info = info
        self.sim = sim
        self.limited = limited
        self.stalled = stalled
        self.admin = {"Authorization": f"Bearer {info['admin_token']}"}
        self.clients: list[Any] = []

    async def token(self, session: str) -> str:
        async with httpx.AsyncClient() as http:
            r = await http.post(
                self.info["anthropic_base_url"] + "/fleet/sessions", json={"session_id": session}, headers=self.admin
            )
            return str(r.json()["token"])

    async def admin_post(self, path: str, body: dict[str, Any]) -> None:
        async with httpx.AsyncClient() as http:
            r = await http.post(self.info["anthropic_base_url"] + path, json=body, headers=self.admin)
            assert r.status_code == 200, r.text

    async def stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient() as http:
            return dict((await http.get(self.info["anthropic_base_url"] + "/fleet/stats", headers=self.admin)).json())

    async def openai(self, session: str, **kw: Any) -> openai.AsyncOpenAI:
        kw.setdefault("max_retries", 0)
        c = openai.AsyncOpenAI(base_url=self.info["openai_base_url"], api_key=await self.token(session), **kw)
        self.clients.append(c)
        return c

    async def anthropic(self, session: str, **kw: Any) -> anthropic.AsyncAnthropic:
        kw.setdefault("max_retries", 0)
        c = anthropic.AsyncAnthropic(base_url=self.info["anthropic_base_url"], api_key=await self.token(session), **kw)
        self.clients.append(c)
        return c

    def paths(self) -> list[str]:
        assert self.sim.received is not None
        return [r.path for r in self.sim.received]


def fleet_yaml(path: Path, sim: SimProvider, limited: SimProvider, stalled: SimProvider) -> Path:
    models = [
        {"name": "fast", "provider": sim.base_url, "model": "gpt-4.1-mini", "api_key_env": "SIM_KEY"},
        {
            "name": "native",
            "provider": sim.base_url,
            "model": "gpt-4.1",
            "api_key_env": "SIM_KEY",
            "responses_api": True,
        },
        {
            "name": "claude",
            "provider": "anthropic",
            "base_url": sim.base_url,
            "model": "claude-sonnet-4-5",
            "api_key_env": "SIM_KEY",
        },
        {"name": "limited", "provider": limited.base_url, "model": "gpt-4.1-nano", "api_key_env": "SIM_KEY"},
        {
            "name": "stalled",
            "provider": stalled.base_url,
            "model": "sim-small",
            "api_key_env": "SIM_KEY",
            "timeout_s": 1,
        },
    ]
    path.write_text(json.dumps({"models": models, "aliases": {"claude-haiku-*": "claude"}}))  # JSON is YAML
    return path


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Running]:
    async with (
        SimProvider(SimConfig(reject_unknown_models=True), record=50) as sim,
        SimProvider(SimConfig(rate_429=1.0), record=50) as limited,
        SimProvider(SimConfig(rate_stall=1.0, stall_seconds=2.0, stall_drop=0.0), record=10) as stalled,
    ):
        config = fleet_yaml(tmp_path / "fleet.yaml", sim, limited, stalled)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_fleet.cli",
            "gateway",
            "--port",
            "0",
            "--config",
            str(config),
            "--json",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "SIM_KEY": KEY},
            start_new_session=True,
        )
        running: Running | None = None
        try:
            assert proc.stdout is not None
            info = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
            running = Running(info, sim, limited, stalled)
            yield running
        finally:
            for c in running.clients if running else ():
                await c.close()
            _out, err = await stop_async(proc, sig=signal.SIGINT, timeout=30, group=True)
            assert KEY not in err.decode()


async def test_openai_sdk_plain_streamed_and_tools(gateway: Running) -> None:
    client = await gateway.openai("oa")
    plain = await client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": "Task: hi"}]
    )
    assert plain.choices[0].message.content and plain.usage is not None
    stream = await client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": "Task: hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain.choices[0].message.content
    tools = await client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": TASK}], tools=CHAT_TOOLS
    )
    call = (tools.choices[0].message.tool_calls or [])[0]
    assert call.function.name == "submit_result" and len(json.loads(call.function.arguments)["items"]) == 2  # type: ignore[union-attr]
    stats = await gateway.stats()
    assert stats["run"]["llm_calls"] == 3 and stats["requests"] == {"ok": 3}
    assert gateway.paths() == ["/v1/chat/completions"] * 3


async def test_anthropic_sdk_plain_streamed_and_tools(gateway: Running) -> None:
    client = await gateway.anthropic("an")
    plain = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=500, messages=[{"role": "user", "content": "Task: hi"}]
    )
    assert plain.content[0].type == "text"
    async with client.messages.stream(
        model="claude-haiku-4-5", max_tokens=500, messages=[{"role": "user", "content": "Task: hi"}]
    ) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert text == plain.content[0].text and final.model == "claude-sonnet-4-5"  # routed by the alias
    tools = [{"name": "submit_result", "description": "Report", "input_schema": {"type": "object", "properties": {}}}]
    msg = await client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=500,
        messages=[{"role": "user", "content": TASK}],
        tools=tools,  # type: ignore[list-item]
    )
    assert msg.stop_reason == "tool_use" and [b.type for b in msg.content] == ["tool_use"]
    assert gateway.paths() == ["/v1/messages"] * 3


@pytest.mark.parametrize("model, path", [("gpt-4.1", "/v1/responses"), ("gpt-4.1-mini", "/v1/chat/completions")])
async def test_responses_create_plain_and_streamed(gateway: Running, model: str, path: str) -> None:
    client = await gateway.openai("rs")
    r = await client.responses.create(model=model, input="Task: hi")
    assert r.status == "completed" and r.output_text and r.usage is not None
    stream = await client.responses.create(model=model, input="Task: hi", stream=True)
    events = [e async for e in stream]
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == r.output_text
    stats = await gateway.stats()
    assert stats["run"]["llm_calls"] == 2
    assert stats["run"]["tokens"]["input"] == r.usage.input_tokens + events[-1].response.usage.input_tokens  # type: ignore[union-attr]
    assert gateway.paths() == [path, path]


async def test_a_budget_refusal_is_the_sdks_typed_error_and_is_not_retried(gateway: Running) -> None:
    await gateway.admin_post("/fleet/budget", {"id": "broke", "tokens": 0})
    claude = await gateway.anthropic("broke", max_retries=2)
    with pytest.raises(anthropic.PaymentRequiredError):
        await claude.messages.create(
            model="claude-sonnet-4-5", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    oa = await gateway.openai("broke", max_retries=2)
    with pytest.raises(openai.APIStatusError) as info:
        await oa.responses.create(model="gpt-4.1-mini", input="hi")
    assert (info.value.status_code, info.value.code) == (402, "budget_exceeded")
    assert (await gateway.stats())["requests"] == {"budget_exhausted": 2}  # each SDK asked once
    assert gateway.paths() == []


async def test_a_429_is_passed_on_with_its_retry_after(gateway: Running) -> None:
    client = await gateway.openai("limited")
    with pytest.raises(openai.RateLimitError) as info:
        await client.chat.completions.create(model="limited", messages=[{"role": "user", "content": "hi"}])
    assert info.value.response.headers["retry-after"] == "1"
    assert gateway.limited.received is not None and len(gateway.limited.received) == 1  # the SDK retries, not us


async def test_a_timeout_is_answered_so_the_sdk_does_not_send_it_again(gateway: Running) -> None:
    """A provider that does not answer in time may still have done (and billed) the work: the gateway
    charges it at its reservation and answers 504 marked not to be retried, saying why. The SDK, which
    retries a 5xx twice by default, sends it once."""
    client = await gateway.openai("slow", max_retries=2)
    with pytest.raises(openai.APIStatusError) as info:
        await client.chat.completions.create(model="stalled", messages=[{"role": "user", "content": "Task: hi"}])
    assert info.value.status_code == 504
    assert info.value.response.headers["x-should-retry"] == "false"
    assert "charged at its reservation: not to be retried" in info.value.message
    assert gateway.stalled.received is not None and len(gateway.stalled.received) == 1
