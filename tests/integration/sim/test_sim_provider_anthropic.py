"""The simulated provider's Anthropic Messages endpoint, driven by the official anthropic SDK."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import pytest
from test_sim_provider_helpers import (
    DEMO,
    DIR_TOOLS,
    LIST_TOOLS,
    anthropic_tools,
    demo_python_files,
    files_message,
    items_message,
    run_anthropic_session,
)

from agent_fleet.sim.detectors import detect
from agent_fleet.sim.provider import SimConfig, SimProvider


@pytest.fixture
async def sim() -> AsyncIterator[SimProvider]:
    async with SimProvider(SimConfig()) as provider:
        yield provider


def client_for(sim: SimProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=sim.root_url, api_key="sk-ant-test", max_retries=0)


def rfc3339(text: str) -> datetime.datetime:
    assert text.endswith("Z")
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


async def test_directory_partition_session(sim: SimProvider) -> None:
    paths = demo_python_files()[30:]
    trace = await run_anthropic_session(client_for(sim), files_message(paths), tools=DIR_TOOLS, partition=set(paths))
    names = [[name for _, name, _ in turn] for turn in trace.calls]
    assert len(paths) > 25
    assert names == [["read_file"] * 25, ["read_file"] * (len(paths) - 25), ["submit_result"], ["finish"]]
    expected = [f.to_item() for p in paths for f in detect(p, (DEMO / p).read_text())]
    assert trace.submitted == expected and len(expected) >= 20
    ids = [i for turn in trace.calls for i, _, _ in turn]
    assert len(set(ids)) == len(ids) and all(i.startswith("toolu_") for i in ids)


async def test_list_partition_session(sim: SimProvider) -> None:
    items = [f"https://blog.example.com/posts/scaling-agents-part-{i}" for i in range(7)]
    trace = await run_anthropic_session(client_for(sim), items_message(items), tools=LIST_TOOLS)
    assert [[n for _, n, _ in turn] for turn in trace.calls] == [["submit_result"], ["submit_result"], ["finish"]]
    assert [r["location"] for r in trace.submitted] == items
    assert {r["category"] for r in trace.submitted} == {"blog"}
    assert trace.summary == "Processed 7 items and submitted 7 results."


async def test_streamed_session_matches_the_plain_one() -> None:
    paths = demo_python_files()[:6]
    async with SimProvider() as a, SimProvider() as b:
        plain = await run_anthropic_session(client_for(a), files_message(paths), tools=DIR_TOOLS, partition=set(paths))
        streamed = await run_anthropic_session(
            client_for(b), files_message(paths), tools=DIR_TOOLS, partition=set(paths), stream=True
        )
    assert streamed.calls == plain.calls
    assert streamed.submitted == plain.submitted
    assert [u.model_dump() for u in streamed.usages] == [u.model_dump() for u in plain.usages]


async def test_stream_event_sequence(sim: SimProvider) -> None:
    paths = demo_python_files()[:2]
    kwargs: dict[str, Any] = {
        "model": "claude-sim",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": files_message(paths)}],
        "tools": anthropic_tools(DIR_TOOLS),
    }
    stream = await client_for(sim).messages.create(stream=True, **kwargs)
    events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert deltas and all(d.type == "input_json_delta" for d in deltas)
    start = events[0].message  # type: ignore[union-attr]
    final = events[-2]
    assert start.stop_reason is None and start.usage.input_tokens > 0
    assert final.delta.stop_reason == "tool_use"  # type: ignore[union-attr]
    plain = await client_for(sim).messages.create(**kwargs)
    assert final.usage.output_tokens == plain.usage.output_tokens  # type: ignore[union-attr]


async def test_plain_text_answer_and_determinism(sim: SimProvider) -> None:
    client = client_for(sim)
    kwargs: dict[str, Any] = {
        "model": "claude-sim",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Explain admission control for agent fleets"}],
    }
    first = await client.messages.create(**kwargs)
    second = await client.messages.create(**kwargs)
    assert first.stop_reason == "end_turn"
    assert first.content[0].type == "text" and "admission" in first.content[0].text
    assert first.id == second.id and first.content == second.content


async def test_input_tokens_exclude_cache_reads() -> None:
    long_text = "The warehouse re-orders stock when it falls below its threshold. " * 100
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": long_text},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Summarise that."},
    ]
    kwargs: dict[str, Any] = {"model": "claude-sim", "max_tokens": 256}
    async with SimProvider() as sim:
        client = client_for(sim)
        first = await client.messages.create(messages=messages, **kwargs)
        again = await client.messages.create(messages=messages, **kwargs)
    async with SimProvider() as fresh:
        prefix = await client_for(fresh).messages.create(messages=messages[:2], **kwargs)
    assert first.usage.cache_read_input_tokens == 0
    assert prefix.usage.input_tokens >= 1024
    assert again.usage.cache_read_input_tokens == prefix.usage.input_tokens
    assert again.usage.input_tokens == first.usage.input_tokens - prefix.usage.input_tokens
    assert again.content == first.content


async def test_each_turn_reads_the_previous_turn_from_cache() -> None:
    paths = demo_python_files()[:8]
    async with SimProvider() as sim:
        trace = await run_anthropic_session(
            client_for(sim), files_message(paths), tools=DIR_TOOLS, partition=set(paths)
        )
    usages = trace.usages
    assert usages[0].cache_read_input_tokens == 0
    for previous, current in itertools.pairwise(usages):
        # a turn repeats all of the previous turn's prompt; it counts as cached once it is at least 1024 tokens
        previous_total = previous.input_tokens + previous.cache_read_input_tokens
        assert current.cache_read_input_tokens == (previous_total if previous_total >= 1024 else 0)
        assert current.input_tokens + current.cache_read_input_tokens > previous_total
    assert usages[-1].cache_read_input_tokens > 0


async def test_429_headers_and_body_through_the_sdk() -> None:
    async with SimProvider(SimConfig(rpm=2)) as sim:
        client = client_for(sim)
        kwargs: dict[str, Any] = {"model": "c", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        ok = await client.messages.with_raw_response.create(**kwargs)
        assert ok.headers["anthropic-ratelimit-requests-limit"] == "2"
        assert ok.headers["anthropic-ratelimit-requests-remaining"] == "1"
        await client.messages.create(**kwargs)
        with pytest.raises(anthropic.RateLimitError) as caught:
            await client.messages.create(**kwargs)
    err = caught.value
    body = err.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error" and body["error"]["message"]
    h = err.response.headers
    assert 55 <= int(h["retry-after"]) <= 60
    now = datetime.datetime.now(datetime.UTC)
    assert h["anthropic-ratelimit-requests-remaining"] == "0"
    for name in ("requests", "tokens", "input-tokens", "output-tokens"):
        assert h[f"anthropic-ratelimit-{name}-limit"].isdigit()
        assert h[f"anthropic-ratelimit-{name}-remaining"].isdigit()
        reset = rfc3339(h[f"anthropic-ratelimit-{name}-reset"])
        assert now - datetime.timedelta(seconds=2) <= reset <= now + datetime.timedelta(seconds=62)


async def test_529_overloaded() -> None:
    async with SimProvider(SimConfig(rate_529=1.0)) as sim:
        with pytest.raises(anthropic.APIStatusError) as caught:
            await client_for(sim).messages.create(
                model="c", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
    assert caught.value.status_code == 529
    assert caught.value.response.json()["error"]["type"] == "overloaded_error"


async def test_billing_limit_is_400_invalid_request() -> None:
    async with SimProvider(SimConfig(insufficient_quota=True)) as sim:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client_for(sim).messages.create(
                model="c", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
    body = caught.value.response.json()
    assert body["error"]["type"] == "invalid_request_error" and "credit balance" in body["error"]["message"]


async def test_missing_key_is_401_authentication_error(sim: SimProvider) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.post(
            sim.base_url + "/messages",
            json={"model": "c", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
            headers={"anthropic-version": "2023-06-01"},
        )
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "authentication_error"
    assert "sk-" not in r.text


async def test_models_list_in_anthropic_shape(sim: SimProvider) -> None:
    page = await client_for(sim).models.list()
    assert [m.id for m in page.data] == list(sim.config.models)
