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

from agent_fleet.domain.calls import Quirks
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall, ToolSpec
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ClientRequestError, MalformedResponse, Overloaded, ProviderError
from agent_fleet.spend.patience import current_watch
from agent_fleet.spend.providers._base import HttpProvider, ProviderOptions
from agent_fleet.spend.providers._wire import answer_of, dump_json, load_json
from agent_fleet.spend.providers.openai_stream import assemble, openai_usage

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
        # Sent even when "auto": some servers (llama-cpp-python) ignore the tools of a call without it.
        body["tool_choice"] = request.tool_choice or "auto"
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.seed is not None:
        body["seed"] = request.seed
    return body


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
        seed=body.get("seed") if isinstance(body.get("seed"), int) else None,
        tool_choice=choice if isinstance(choice := body.get("tool_choice"), str) else None,
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

    def __init__(
        self,
        *,
        responses_api: bool | None = None,
        quirks: Quirks | None = None,
        **options: Unpack[ProviderOptions],
    ) -> None:
        super().__init__(**options)
        # The official API rejects max_tokens for reasoning models; compatible servers may not know the new name.
        self.max_tokens_field = "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"
        # Whether ``/responses`` is served here; compatible servers (vLLM, Ollama) mostly lack it.
        self.responses_api = self.host == "api.openai.com" if responses_api is None else responses_api
        # What this server is known not to do: declared (fleet.yaml compat), else learned from its answers.
        self.quirks = quirks or Quirks({})
        self._refused_500: dict[int, None] = {}  # digests of requests answered 500 (insertion order: oldest first)
        self._answered = False  # the server has answered a call

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}", "content-type": "application/json"}

    def streams(self, request: ChatRequest, quirks: Quirks | None = None) -> bool:
        """Whether ``request`` is streamed to this server: under the gateway's watch (where progress
        keeps a slow call alive, ``spend.patience``) and where the server can."""
        watch = current_watch()
        if watch is None or not watch.stream:
            return False
        has = (quirks or self.quirks).has
        if has("no_streaming") or has("no_usage_chunk"):
            return False
        return not (request.tools and has("no_streaming_with_tools"))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """One call, streamed where the server can. A refusal that a quirk of the server explains (a null
        content it cannot take, tools it cannot stream) is sent again once without it, and the quirk is
        learned when that succeeds; a 500 that is the request's fault is a client error (not retried)."""
        model = request.model or self.model
        quirks = self.quirks
        while True:
            try:
                answer = await self._complete_as(request, model, quirks)
            except (ClientRequestError, Overloaded) as exc:
                fix = _fix_for(exc, request, quirks, streamed=self.streams(request, quirks))
                if fix is not None:
                    quirks = quirks.learned(fix)
                    continue
                raise self._client_500(exc) from None
            self._answered = True
            if quirks is not self.quirks:
                self.quirks = Quirks({**self.quirks.known, **quirks.known})
            return answer

    async def _complete_as(self, request: ChatRequest, model: str, quirks: Quirks) -> ChatResponse:
        body = openai_body(request, model, max_tokens_field=self.max_tokens_field)
        if quirks.has("content_null_as_empty"):
            body["messages"] = [_no_null(m) for m in body["messages"]]
        if quirks.has("tool_results_as_user"):
            body["messages"] = _tool_results_as_user(body["messages"])
        stream = self.streams(request, quirks)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        payload = dump_json(body)
        try:
            raw = await self._post_json(self.raw_path, payload, model, streaming=stream)
        except Overloaded as exc:
            digest = hash(payload)
            exc.digest = digest  # type: ignore[attr-defined]
            raise
        if stream and raw.lstrip()[:1] != b"{":  # a server may answer a stream with one whole JSON body
            response, with_usage = assemble(raw, host=self.host, model=model)
            if not with_usage and self.quirks.has("no_usage_chunk") is None:
                self.quirks = self.quirks.learned("no_usage_chunk")  # its next calls are not streamed
            return response
        answer = answer_of(self.host, raw, api="an OpenAI chat completion", key="choices", loads=load_json)
        return openai_response(answer, model)

    def _client_500(self, exc: ProviderError) -> ProviderError:
        """A 500 that is the request's fault, as a client error (never retried): declared
        (``client_errors_as_500``), or found — the same request refused twice by a server that answers
        other requests (a server that fails everything is down, not refusing)."""
        if not isinstance(exc, Overloaded) or exc.status != 500 or self.quirks.has("client_errors_as_500") is False:
            return exc
        digest = getattr(exc, "digest", None)
        again = digest is not None and digest in self._refused_500 and self._answered
        if digest is not None:
            self._refused_500[digest] = None
            while len(self._refused_500) > 256:
                del self._refused_500[next(iter(self._refused_500))]
        if self.quirks.has("client_errors_as_500") or again:
            why = "declared client_errors_as_500" if self.quirks.has("client_errors_as_500") else "refused it again"
            err = ClientRequestError(f"{exc} (a client error sent as a 500: {why}; not retried)", status=500)
            err.retried = getattr(exc, "retried", ())  # type: ignore[attr-defined]
            return err
        return exc

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


def _no_null(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message with ``"content": ""`` where it had null (``content_null_as_empty``)."""
    if message.get("role") == "assistant" and message.get("content") is None:
        return {**message, "content": ""}
    return message


def _tool_results_as_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tool`` messages as user messages naming the tool (``tool_results_as_user``), and which of its
    turn's calls answered when the turn made several ("call 2 of 3"). The call's id is not written: a
    server makes one up for every answer, and a prompt that carried it would differ from run to run (a
    model at temperature 0 then answers two runs differently) and cost tokens for nothing."""
    calls: dict[str, tuple[str, int, int]] = {}
    for m in messages:
        if m.get("role") == "assistant":
            made = list(m.get("tool_calls") or ())
            for n, c in enumerate(made, start=1):
                calls[str(c.get("id"))] = (str((c.get("function") or {}).get("name") or "a tool"), n, len(made))
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool":
            name, n, of = calls.get(str(m.get("tool_call_id") or ""), ("a tool", 1, 1))
            which = f" (call {n} of {of})" if of > 1 else ""
            text = m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            out.append({"role": "user", "content": f"Result of {name}{which}: {text}"})
        else:
            out.append(m)
    return out


def _fix_for(exc: ProviderError, request: ChatRequest, quirks: Quirks, *, streamed: bool) -> str | None:
    """The quirk that may explain a refusal (a 4xx, or a 500 some servers send instead), not yet
    known either way, and what it would change in this request; None when nothing does."""
    if isinstance(exc, Overloaded) and exc.status != 500:
        return None  # 502/503/504/529: the server is busy or down, not refusing this request
    has_null = any(m.get("role") == "assistant" and m.get("content") is None for m in request.messages)
    if has_null and quirks.has("content_null_as_empty") is None:
        return "content_null_as_empty"
    if streamed and request.tools and quirks.has("no_streaming_with_tools") is None:
        return "no_streaming_with_tools"
    return None
