"""Providers' embeddings endpoints against a scripted server behind the mock transport: batches, vector
order and encodings, usage, and errors mapped as for chat calls."""

from __future__ import annotations

import base64
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_fleet.errors import (
    ClientRequestError,
    MalformedResponse,
    Overloaded,
    QuotaExhausted,
    RateLimited,
)
from agent_fleet.spend.providers import OpenAIProvider
from agent_fleet.spend.providers.transport import Answer, MockRequest, MockTransport


@dataclass
class EmbeddingsServer:
    replies: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    base64: bool = False
    base_url: str = ""

    def handle(self, request: MockRequest) -> Answer:
        assert request.path == "embeddings" and request.headers["authorization"] == "Bearer sk-test-secret"
        body = request.json()
        self.seen.append(body)
        if self.replies:
            status, payload, headers = self.replies.pop(0)
            return Answer(status, {"content-type": "application/json", **headers}, json.dumps(payload).encode())
        data = []
        for i, text in enumerate(body["input"]):
            vec = [float(len(text)), float(i), 0.5]
            value: Any = base64.b64encode(struct.pack("<3f", *vec)).decode() if self.base64 else vec
            data.append({"object": "embedding", "index": i, "embedding": value})
        data.reverse()  # order comes from "index", not from the position in the list
        tokens = sum(math.ceil(len(t) / 4) for t in body["input"])
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        answer = {"object": "list", "data": data, "model": body["model"], "usage": usage}
        return Answer(200, {"content-type": "application/json"}, json.dumps(answer).encode())


def provider_for(server: EmbeddingsServer) -> OpenAIProvider:
    return OpenAIProvider(api_key="sk-test-secret", base_url=server.base_url, transport=MockTransport(server.handle))


@pytest.fixture
def server() -> EmbeddingsServer:
    return EmbeddingsServer(base_url="http://127.0.0.1:9/v1")


async def test_openai_provider_posts_float_batches_of_at_most_256(server: EmbeddingsServer) -> None:
    provider = OpenAIProvider(
        api_key="sk-test-secret", base_url=server.base_url, transport=MockTransport(server.handle)
    )
    try:
        texts = [f"text number {i}" for i in range(300)]
        vectors, usage = await provider.embed(texts, "text-embedding-3-small", dimensions=3)
        assert [len(b["input"]) for b in server.seen] == [256, 44]
        assert all(b["encoding_format"] == "float" and b["dimensions"] == 3 for b in server.seen)
        assert [v[0] for v in vectors] == [float(len(t)) for t in texts]
        assert [v[1] for v in vectors[254:258]] == [254.0, 255.0, 0.0, 1.0]
        assert usage.input_tokens == sum(math.ceil(len(t) / 4) for t in texts)
        server.base64 = True  # a server that answers base64 anyway
        vectors, _ = await provider.embed(["abcd"], "m")
        assert vectors == [[4.0, 0.0, 0.5]]
    finally:
        await provider.aclose()


async def test_openai_provider_maps_errors_like_chat_calls(server: EmbeddingsServer) -> None:
    provider = OpenAIProvider(
        api_key="sk-test-secret", base_url=server.base_url, transport=MockTransport(server.handle)
    )
    server.replies = [
        (429, {"error": {"message": "slow down", "type": "requests"}}, {"retry-after": "3"}),
        (429, {"error": {"message": "You exceeded your quota", "code": "insufficient_quota"}}, {}),
        (503, {"error": {"message": "busy"}}, {}),
        (400, {"error": {"message": "input too long sk-test-secret"}}, {}),
        (200, {"data": [], "usage": {"prompt_tokens": 1}}, {}),
    ]
    try:
        with pytest.raises(RateLimited) as limited:
            await provider.embed(["a"], "m")
        assert limited.value.retry_after == 3.0
        with pytest.raises(QuotaExhausted):
            await provider.embed(["a"], "m")
        with pytest.raises(Overloaded):
            await provider.embed(["a"], "m")
        with pytest.raises(ClientRequestError) as bad:
            await provider.embed(["a"], "m")
        assert "sk-test-secret" not in str(bad.value)
        with pytest.raises(MalformedResponse, match="0 embeddings for 1 inputs"):
            await provider.embed(["a"], "m")
    finally:
        await provider.aclose()
