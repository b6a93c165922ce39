"""Anthropic Messages, translated to and from the neutral (OpenAI-shaped) messages.

Translation, both ways:

* ``system`` messages          <-> the top-level ``system`` text
* assistant ``tool_calls``     <-> ``tool_use`` content blocks (arguments JSON text <-> ``input`` object)
* ``role: "tool"`` messages    <-> a ``user`` message of ``tool_result`` blocks (consecutive ones merged,
  since Anthropic wants user and assistant turns to alternate)
* usage: Anthropic's ``input_tokens`` *excludes* cache reads and writes; the neutral ``input_tokens``
  includes them, with ``cached_input_tokens`` (reads) and ``cache_write_tokens`` (writes) broken out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ConfigError
from agent_fleet.spend.providers._base import HttpProvider
from agent_fleet.spend.providers._wire import answer_of, dump_json

__all__ = [
    "AnthropicProvider",
    "anthropic_body",
    "anthropic_response",
    "anthropic_usage",
    "from_anthropic_request",
    "to_anthropic_response",
]

API_VERSION = "2023-06-01"

_STOP_TO_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_FINISH_TO_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif isinstance(part, str):
            parts.append(part)
    return "".join(parts)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p if p.get("type") != "text" else {"type": "text", "text": p.get("text", "")} for p in content]


def _tool_input(arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"value": value}


def anthropic_body(request: ChatRequest, model: str) -> dict[str, Any]:
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for msg in request.messages:
        role = msg.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(msg.get("content")))
        elif role == "assistant":
            blocks = _blocks(msg.get("content"))
            for call in msg.get("tool_calls") or ():
                fn = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": fn.get("name"),
                        "input": _tool_input(fn.get("arguments", "")),
                    }
                )
            push("assistant", blocks)
        elif role == "tool":
            push(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": msg.get("tool_call_id"),
                        "content": _text_of(msg.get("content")),
                    }
                ],
            )
        else:
            push("user", _blocks(msg.get("content")))
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "messages": messages}
    if system:
        body["system"] = "\n\n".join(system)
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
        ]
        if request.tool_choice is not None:  # Anthropic's default is auto; it has no seed
            body["tool_choice"] = {"type": _TOOL_CHOICE[request.tool_choice]}
    _cache_breakpoints(body)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


_TOOL_CHOICE = {"auto": "auto", "required": "any", "none": "none"}


_EPHEMERAL = {"type": "ephemeral"}


def _cache_breakpoints(body: dict[str, Any]) -> None:
    """Prompt-cache breakpoints on the stable prefix (Anthropic caches tools → system → messages up
    to a marked block): the last tool, so the toolset and its schema are read from the cache by every
    turn, and the last block of the conversation, so the next turn reads everything before it (the
    turns only grow at the end; a prefix under the model's minimum is simply not cached)."""
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = dict(_EPHEMERAL)
    messages = body.get("messages") or []
    if messages and messages[-1].get("content"):
        blocks = messages[-1]["content"]
        blocks[-1] = {**blocks[-1], "cache_control": dict(_EPHEMERAL)}  # a copy: the request stays as it was


def anthropic_usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    reads = int(raw.get("cache_read_input_tokens") or 0)
    writes = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) + reads + writes,
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_input_tokens=reads,
        cache_write_tokens=writes,
    )


def anthropic_response(data: dict[str, Any], model: str) -> ChatResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in data.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=str(block.get("id")), name=str(block.get("name")), arguments=json.dumps(block.get("input") or {})
                )
            )
    stop = str(data.get("stop_reason") or "end_turn")
    return ChatResponse(
        content="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        usage=anthropic_usage(data.get("usage")),
        finish_reason=_STOP_TO_FINISH.get(stop, stop),
        model=str(data.get("model") or model),
    )


# --- the reverse direction, for the gateway service (Anthropic clients in front of any provider) ---


def from_anthropic_request(body: dict[str, Any]) -> ChatRequest:
    """An Anthropic Messages request body as a neutral request."""
    from agent_fleet.domain.model import ToolSpec

    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text_of(system)})
    for msg in body.get("messages") or ():
        role = msg.get("role")
        content = msg.get("content")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in content or ():
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                calls.append(
                    {
                        "id": block.get("id"),
                        "type": "function",
                        "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input") or {})},
                    }
                )
            elif kind == "tool_result":
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id"),
                        "content": _text_of(block.get("content")),
                    }
                )
        if role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
        elif texts:
            messages.append({"role": role, "content": "".join(texts)})
    tools = tuple(
        ToolSpec(name=t["name"], description=t.get("description", ""), parameters=t.get("input_schema") or {})
        for t in body.get("tools") or ()
    )
    return ChatRequest(
        model=str(body.get("model") or ""),
        messages=messages,
        tools=tools,
        max_tokens=int(body.get("max_tokens") or 4096),
        temperature=body.get("temperature"),
        tool_choice=_tool_choice_of(body.get("tool_choice")),
    )


_FROM_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


def _tool_choice_of(value: Any) -> str | None:
    """A Messages ``tool_choice`` as a neutral one (a named tool has no neutral form: None)."""
    return _FROM_TOOL_CHOICE.get(str(value.get("type"))) if isinstance(value, dict) else None


def to_anthropic_response(response: ChatResponse, *, message_id: str) -> dict[str, Any]:
    """A neutral response as an Anthropic Messages response body."""
    content: list[dict[str, Any]] = []
    if response.content:
        content.append({"type": "text", "text": response.content})
    for call in response.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call.arguments)})
    u = response.usage
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": response.model,
        "content": content,
        "stop_reason": _FINISH_TO_STOP.get(response.finish_reason, "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": u.input_tokens - u.cached_input_tokens - u.cache_write_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cached_input_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
        },
    }


class AnthropicProvider(HttpProvider):
    """An Anthropic-compatible ``/messages`` endpoint (Anthropic serves no embeddings)."""

    raw_path = "messages"

    kind = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    default_model = "claude-sonnet-4-5"
    max_embedding_batch = 0  # no embeddings endpoint: the gateway refuses before reserving anything

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": API_VERSION, "content-type": "application/json"}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        model = request.model or self.model
        payload = dump_json(anthropic_body(request, model))
        body = await self._post_json(self.raw_path, payload, model)
        return anthropic_response(answer_of(self.host, body, api="an Anthropic Messages", key="content"), model)

    async def embed(
        self, texts: Sequence[str], model: str, *, dimensions: int | None = None
    ) -> tuple[list[list[float]], Usage]:
        raise ConfigError(
            f"{self.name}: Anthropic has no embeddings endpoint; route embeddings to an OpenAI-compatible "
            "model in fleet.yaml (a models: entry with provider openai or an OpenAI-compatible URL, "
            "e.g. model text-embedding-3-small)"
        )
