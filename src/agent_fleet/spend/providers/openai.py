"""OpenAI chat completions (and every server that speaks its wire format).

Per-call work is kept to plain dicts and one ``json.dumps``/``json.loads``: no pydantic models,
no SDK, one shared :class:`httpx.AsyncClient` sized to the concurrency.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import Overloaded
from agent_fleet.spend.providers._wire import (
    SignalSink,
    error_from_response,
    host_of,
    make_client,
    signals_from_headers,
    transport_error,
)

__all__ = ["OpenAIProvider", "openai_body", "openai_response", "openai_usage"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


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


class OpenAIProvider:
    """An OpenAI-compatible ``/chat/completions`` endpoint."""

    kind = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        model: str = "gpt-4.1-mini",
        timeout: float = 120.0,
        max_connections: int = 64,
        name: str = "openai",
        on_signals: SignalSink | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.host = host_of(self.base_url)
        self.on_signals = on_signals
        self._key = api_key
        # The official API rejects max_tokens for reasoning models; compatible servers may not know the new name.
        self._max_field = "max_completion_tokens" if self.host == "api.openai.com" else "max_tokens"
        headers = {"authorization": f"Bearer {api_key}", "content-type": "application/json"}
        self._client = make_client(
            base_url=self.base_url, headers=headers, timeout=timeout, max_connections=max_connections
        )

    @property
    def client(self) -> httpx.AsyncClient:
        return self._client

    async def complete(self, request: ChatRequest) -> ChatResponse:
        model = request.model or self.model
        payload = json.dumps(openai_body(request, model, max_tokens_field=self._max_field)).encode()
        try:
            response = await self._client.post("chat/completions", content=payload)
        except httpx.HTTPError as exc:
            raise transport_error(self.host, exc) from None
        if self.on_signals is not None:
            signals = signals_from_headers(response.headers)
            if signals is not None:
                self.on_signals(model, signals)
        if response.status_code >= 400:
            raise error_from_response(self.host, response, scrub=self._key)
        try:
            data = json.loads(response.content)
        except ValueError:
            raise Overloaded(f"{self.host} sent a response that is not JSON", status=response.status_code) from None
        return openai_response(data, model)

    async def aclose(self) -> None:
        await self._client.aclose()

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"
