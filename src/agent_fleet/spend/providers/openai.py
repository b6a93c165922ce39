"""OpenAI chat completions (and every server that speaks its wire format).

Per-call work is kept to plain dicts and one JSON encode and decode (orjson, ``_wire.dump_json`` and
``load_json``): no pydantic models, no SDK, one connection pool sized to the concurrency (``_fast``).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Sequence
from typing import Any, Unpack

from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall, ToolSpec
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import MalformedResponse
from agent_fleet.spend.providers._base import HttpProvider, ProviderOptions
from agent_fleet.spend.providers._wire import answer_of, dump_json, load_json

__all__ = [
    "MAX_EMBEDDING_BATCH",
    "OpenAIProvider",
    "embeddings_body",
    "from_openai_request",
    "openai_body",
    "openai_response",
    "openai_usage",
    "parse_embeddings",
    "to_openai_response",
]

MAX_EMBEDDING_BATCH = 256  # inputs per embeddings request (the API allows 2,048; smaller keeps retries cheap)


def openai_body(request: ChatRequest, model: str, *, max_tokens_field: str = "max_tokens") -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": request.messages, max_tokens_field: request.max_tokens}
    if request.tools:
        body["tools"] = [t.to_openai() for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def openai_usage(raw: dict[str, Any] | None) -> Usage:
    """``prompt_tokens`` already includes ``cached_tokens`` (our convention): keep it as is."""
    if not raw:
        return Usage()
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
    )


def openai_response(data: dict[str, Any], model: str) -> ChatResponse:
    choices = data.get("choices") or [{}]
    choice = choices[0]
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall(
            id=str(c.get("id") or f"call_{i}"),
            name=str((c.get("function") or {}).get("name") or ""),
            arguments=str((c.get("function") or {}).get("arguments") or "{}"),
        )
        for i, c in enumerate(message.get("tool_calls") or ())
    )
    return ChatResponse(
        content=message.get("content"),
        tool_calls=calls,
        usage=openai_usage(data.get("usage")),
        finish_reason=str(choice.get("finish_reason") or ("tool_calls" if calls else "stop")),
        model=str(data.get("model") or model),
    )


def from_openai_request(body: dict[str, Any]) -> ChatRequest:
    """A chat-completions request body as a neutral request (messages are already neutral)."""
    tools = tuple(
        ToolSpec(
            name=str(fn.get("name")),
            description=str(fn.get("description") or ""),
            parameters=fn.get("parameters") or {"type": "object", "properties": {}},
        )
        for t in body.get("tools") or ()
        if (fn := t.get("function") or {})
    )
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
    return ChatRequest(
        model=str(body.get("model") or ""),
        messages=list(body.get("messages") or ()),
        tools=tools,
        max_tokens=int(max_tokens),
        temperature=body.get("temperature"),
    )


def to_openai_response(response: ChatResponse, *, completion_id: str, created: int) -> dict[str, Any]:
    u = response.usage
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": response.model,
        "choices": [{"index": 0, "message": response.assistant_message(), "finish_reason": response.finish_reason}],
        "usage": {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.total_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
        },
    }


def embeddings_body(texts: Sequence[str], model: str, dimensions: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "input": list(texts), "encoding_format": "float"}
    if dimensions:
        body["dimensions"] = dimensions
    return body


def _vector(value: Any) -> list[float]:
    if isinstance(value, str):  # base64 little-endian float32, from a server that ignored "float"
        raw = base64.b64decode(value)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return [float(x) for x in value]


def parse_embeddings(body: bytes, count: int, *, host: str) -> tuple[list[list[float]], Usage]:
    """An embeddings response as vectors in input order and its usage (``prompt_tokens`` as input tokens).

    An answer that is not JSON or carries the wrong number of vectors is not the API's shape
    (MalformedResponse), as for chat completions.
    """
    try:
        data = json.loads(body)
        items = sorted(data.get("data") or (), key=lambda d: int(d.get("index", 0)))
        vectors = [_vector(item["embedding"]) for item in items]
    except (ValueError, TypeError, KeyError, AttributeError, struct.error):
        raise MalformedResponse(f"{host} sent an embeddings response that cannot be read", status=200) from None
    if len(vectors) != count:
        raise MalformedResponse(f"{host} sent {len(vectors)} embeddings for {count} inputs", status=200)
    return vectors, Usage(input_tokens=int((data.get("usage") or {}).get("prompt_tokens") or 0))


class OpenAIProvider(HttpProvider):
    """An OpenAI-compatible ``/chat/completions`` (and ``/embeddings``) endpoint."""

    raw_path = "chat/completions"

    kind = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_model = "gpt-4.1-mini"
    max_embedding_batch = MAX_EMBEDDING_BATCH

    def __init__(self, *, responses_api: bool | None = None, **options: Unpack[ProviderOptions]) -> None:
        super().__init__(**options)
        # The official API rejects max_tokens for reasoning models; compatible servers may not know the new name.
        self._max_field = "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"
        # Whether ``/responses`` is served here; compatible servers (vLLM, Ollama) mostly lack it.
        self.responses_api = self.host == "api.openai.com" if responses_api is None else responses_api

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}", "content-type": "application/json"}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        model = request.model or self.model
        payload = dump_json(openai_body(request, model, max_tokens_field=self._max_field))
        body = await self._post_json(self.raw_path, payload, model)
        answer = answer_of(self.host, body, api="an OpenAI chat completion", key="choices", loads=load_json)
        return openai_response(answer, model)

    async def embed(
        self, texts: Sequence[str], model: str, *, dimensions: int | None = None
    ) -> tuple[list[list[float]], Usage]:
        """Vectors for ``texts`` (float format), at most ``max_embedding_batch`` inputs per request; errors
        map as for chat calls. The gateway sends one batch per call so each request is reserved apart."""
        vectors: list[list[float]] = []
        usage = Usage()
        model = model or self.model
        for start in range(0, len(texts), self.max_embedding_batch):
            part = texts[start : start + self.max_embedding_batch]
            payload = json.dumps(embeddings_body(part, model, dimensions)).encode()
            body = await self._post_json("embeddings", payload, model)
            got, used = parse_embeddings(body, len(part), host=self.host)
            vectors.extend(got)
            usage = usage + used
        return vectors, usage
