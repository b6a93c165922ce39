"""The simulated provider's OpenAI endpoints, driven by the official openai SDK."""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from test_sim_provider_helpers import (
    DEMO,
    DIR_TOOLS,
    LIST_TOOLS,
    demo_python_files,
    files_message,
    items_message,
    openai_stream_once,
    openai_tools,
    run_openai_session,
)

from agent_fleet.sim.detectors import detect
from agent_fleet.sim.provider import SimConfig, SimProvider

DURATION = re.compile(r"^(\d+ms|\d+(\.\d+)?s|\d+m\d+(\.\d+)?s)$")


@pytest.fixture
async def sim() -> AsyncIterator[SimProvider]:
    async with SimProvider(SimConfig()) as provider:
        yield provider


def client_for(sim: SimProvider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-test", max_retries=0)


async def test_directory_partition_session(sim: SimProvider) -> None:
    paths = [*demo_python_files()[:30], "stockroom/missing.py"]
    client = client_for(sim)
    trace = await run_openai_session(client, files_message(paths), tools=DIR_TOOLS, partition=set(paths))
    names = [[name for _, name, _ in turn] for turn in trace.calls]
    assert names[0] == ["read_file"] * 25
    assert names[1] == ["read_file"] * 6
    assert names[2:] == [["submit_result"], ["finish"]]
    assert [a["path"] for turn in trace.calls[:2] for _, _, a in turn] == paths
    expected = [f.to_item() for p in paths[:30] for f in detect(p, (DEMO / p).read_text())]
    assert trace.submitted == expected and len(expected) >= 20
    assert trace.summary == f"Reviewed 31 files and reported {len(expected)} findings. 1 file could not be read."
    ids = [i for turn in trace.calls for i, _, _ in turn]
    assert len(set(ids)) == len(ids) and all(i.startswith("call_") for i in ids)
    # turn 3 repeats all of turn 2's prompt: that prefix is reported as cached, in multiples of 128
    second, third = trace.usages[1], trace.usages[2]
    assert trace.usages[0].prompt_tokens_details.cached_tokens == 0
    assert third.prompt_tokens_details.cached_tokens == second.prompt_tokens // 128 * 128
    assert third.prompt_tokens > second.prompt_tokens > trace.usages[0].prompt_tokens
    for usage in trace.usages:
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    stats = sim.stats()
    assert stats["requests"]["/v1/chat/completions"] == {"200": 4}
    assert stats["tokens_in"] == sum(u.prompt_tokens for u in trace.usages)
    assert stats["tokens_out"] == sum(u.completion_tokens for u in trace.usages)
    assert stats["in_flight"] == 0


async def test_list_partition_of_ten_items_takes_three_calls(sim: SimProvider) -> None:
    items = [
        "https://github.com/psf/requests/issues/6000",
        "https://github.com/psf/requests/pull/6100",
        "https://docs.python.org/3/library/asyncio-task.html",
        "https://en.wikipedia.org/wiki/Rate_limiting",
        "https://arxiv.org/abs/2305.10601",
        "the checkout page crashes when the basket is empty",
        "please add an export to CSV",
        "how do I reset my password?",
        "delivery was late and support was slow",
        "great service, thanks!",
    ]
    trace = await run_openai_session(client_for(sim), items_message(items), tools=LIST_TOOLS)
    assert [[n for _, n, _ in turn] for turn in trace.calls] == [["submit_result"], ["submit_result"], ["finish"]]
    assert len(trace.submitted) == 10
    assert [r["category"] for r in trace.submitted[5:]] == [
        "bug-report",
        "feature-request",
        "question",
        "complaint",
        "praise",
    ]
    first, second = trace.submitted[0], trace.submitted[1]
    assert first["title"].startswith("github.com:") and second["title"].startswith("github.com:")
    assert first["category"] == second["category"] == "code"
    assert first["body"] != second["body"]
    assert all(0.5 <= r["confidence"] <= 0.95 for r in trace.submitted)


async def test_streamed_session_matches_the_plain_one() -> None:
    paths = demo_python_files()[:5]
    async with SimProvider() as a, SimProvider() as b:
        plain = await run_openai_session(client_for(a), files_message(paths), tools=DIR_TOOLS, partition=set(paths))
        streamed = await run_openai_session(
            client_for(b), files_message(paths), tools=DIR_TOOLS, partition=set(paths), stream=True
        )
    assert streamed.calls == plain.calls
    assert streamed.submitted == plain.submitted
    assert [u.model_dump() for u in streamed.usages] == [u.model_dump() for u in plain.usages]


async def test_stream_reports_usage_only_in_the_last_chunk_and_only_when_asked(sim: SimProvider) -> None:
    client = client_for(sim)
    kwargs: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Describe rate limiting."}]}
    message, usage, chunks = await openai_stream_once(client, stream_options={"include_usage": True}, **kwargs)
    assert usage is not None and usage.completion_tokens > 0
    assert chunks[-1].choices == [] and chunks[-1].usage == usage
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "stop"
    plain = await client.chat.completions.create(**kwargs)
    assert message["content"] == plain.choices[0].message.content
    _, no_usage, chunks = await openai_stream_once(client, **kwargs)
    assert no_usage is None and all(c.usage is None for c in chunks)


async def test_same_request_gives_identical_output_regardless_of_earlier_traffic() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": files_message(demo_python_files()[:3])}],
        "tools": openai_tools(DIR_TOOLS),
    }
    async with SimProvider(SimConfig(seed=1)) as a, SimProvider(SimConfig(seed=2)) as b:
        ca, cb = client_for(a), client_for(b)
        await ca.chat.completions.create(model="m", messages=[{"role": "user", "content": "unrelated"}])
        first = await ca.chat.completions.create(**body)
        again = await ca.chat.completions.create(**body)
        fresh = await cb.chat.completions.create(**body)
    assert first.choices[0].message.tool_calls
    assert first.id == again.id == fresh.id
    assert first.choices == again.choices == fresh.choices


async def test_prompt_tokens_follow_text_size_and_completion_follows_output(sim: SimProvider) -> None:
    client = client_for(sim)
    short = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    longer = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello" + " abc" * 1000}]
    )
    assert longer.usage is not None and short.usage is not None
    assert longer.usage.prompt_tokens - short.usage.prompt_tokens == 1000  # 4,000 more characters
    text = longer.choices[0].message.content or ""
    assert 0 <= longer.usage.completion_tokens - math.ceil(len(text) / 4) <= 5
    with_tools = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], tools=openai_tools(DIR_TOOLS)
    )
    assert with_tools.usage is not None and with_tools.usage.prompt_tokens > short.usage.prompt_tokens + 50


async def test_short_prefixes_are_never_cached(sim: SimProvider) -> None:
    client = client_for(sim)
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
    ]
    for _ in range(2):
        r = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        assert r.usage is not None and r.usage.prompt_tokens_details is not None
        assert r.usage.prompt_tokens_details.cached_tokens == 0


async def test_rate_limit_headers_on_success(sim: SimProvider) -> None:
    raw = await client_for(sim).chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    h = raw.headers
    assert int(h["x-ratelimit-limit-requests"]) > int(h["x-ratelimit-remaining-requests"]) >= 0
    assert int(h["x-ratelimit-limit-tokens"]) > int(h["x-ratelimit-remaining-tokens"]) >= 0
    assert DURATION.match(h["x-ratelimit-reset-requests"]) and DURATION.match(h["x-ratelimit-reset-tokens"])
    assert h["x-request-id"]
    assert raw.parse().choices[0].message.content


async def test_429_body_and_headers_visible_through_the_sdk() -> None:
    async with SimProvider(SimConfig(rate_429=1.0)) as sim:
        with pytest.raises(openai.RateLimitError) as caught:
            await client_for(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        stats = sim.stats()
    err = caught.value
    assert err.status_code == 429
    assert err.code == "rate_limit_exceeded" and err.type == "rate_limit_exceeded"
    body = err.response.json()["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["message"]
    h = err.response.headers
    assert int(h["retry-after"]) >= 1
    for name in ("requests", "tokens"):
        assert h[f"x-ratelimit-limit-{name}"].isdigit() and h[f"x-ratelimit-remaining-{name}"].isdigit()
        assert DURATION.match(h[f"x-ratelimit-reset-{name}"])
    assert stats["rate_limited"] == {"injected": 1}
    assert stats["requests"]["/v1/chat/completions"] == {"429": 1}


@pytest.mark.parametrize("setting", ["rate_503", "rate_529"])
async def test_overload_is_503_server_is_overloaded(setting: str) -> None:
    async with SimProvider(SimConfig(**{setting: 1.0})) as sim:
        with pytest.raises(openai.InternalServerError) as caught:
            await client_for(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 503
    assert caught.value.code == "server_is_overloaded"


async def test_500_server_error() -> None:
    async with SimProvider(SimConfig(rate_500=1.0)) as sim:
        with pytest.raises(openai.InternalServerError) as caught:
            await client_for(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 500
    assert caught.value.type == "server_error"


async def test_insufficient_quota() -> None:
    async with SimProvider(SimConfig(insufficient_quota=True)) as sim:
        with pytest.raises(openai.RateLimitError) as caught:
            await client_for(sim).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.code == "insufficient_quota" and caught.value.type == "insufficient_quota"


async def test_missing_key_is_401_and_bad_body_is_400(sim: SimProvider) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.post(sim.base_url + "/chat/completions", json={"model": "m", "messages": []})
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "invalid_request_error"
        r = await http.post(
            sim.base_url + "/chat/completions", json={"model": "m"}, headers={"Authorization": "Bearer sk-x"}
        )
        assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError):
        await client_for(sim).chat.completions.create(model="m", messages=[])


async def test_models_list(sim: SimProvider) -> None:
    models = [m.id async for m in client_for(sim).models.list()]
    assert models == list(sim.config.models)


async def test_embeddings_similarity_through_the_sdk(sim: SimProvider) -> None:
    texts = [
        "Bare except swallows errors in stockroom/api/orders.py at line 29.",
        "Bare except swallows errors in stockroom/api/products.py at line 24.",
        "Hard-coded credential in source: SECRET_KEY is committed with the code.",
    ]
    client = client_for(sim)
    default = await client.embeddings.create(model="text-embedding-3-small", input=texts)  # base64 on the wire
    as_float = await client.embeddings.create(model="text-embedding-3-small", input=texts, encoding_format="float")
    vectors = [d.embedding for d in default.data]
    assert [len(v) for v in vectors] == [384, 384, 384]
    for a, b in zip(vectors, (d.embedding for d in as_float.data), strict=True):
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-6

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(vectors[0], vectors[1]) > 0.9 > 0.5 > cos(vectors[0], vectors[2])
    assert default.usage.prompt_tokens == sum(math.ceil(len(t) / 4) for t in texts)
    async with httpx.AsyncClient() as http:
        r = await http.post(
            sim.base_url + "/embeddings",
            json={"model": "e", "input": texts[0], "encoding_format": "base64"},
            headers={"Authorization": "Bearer sk-x"},
        )
    raw = base64.b64decode(r.json()["data"][0]["embedding"])
    assert list(struct.unpack("<384f", raw)) == pytest.approx(vectors[0], abs=1e-6)
