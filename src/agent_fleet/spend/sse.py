"""Server-sent event streams of the two wire formats: reading usage out of them, and writing them.

:class:`UsageTap` watches a stream passed through from the provider. OpenAI reports usage only in the
last chunk and only when asked (``stream_options.include_usage``); the gateway always asks, and drops
that chunk again when the client had not asked. Anthropic reports input usage in ``message_start`` and
output usage in the final ``message_delta``; the Responses API reports it in ``response.completed``
(or ``response.incomplete`` / ``response.failed``), which ends its stream. Only events that can carry
usage are decoded, so a long stream costs little CPU. :class:`EventReader` decodes every event of a
stream (the gateway reads a chat stream that way when it writes Responses events from it).
"""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.providers.anthropic import anthropic_usage, to_anthropic_response
from agent_fleet.spend.providers.openai import openai_usage
from agent_fleet.spend.responses import responses_usage

__all__ = ["EventReader", "UsageTap", "anthropic_stream", "openai_stream"]

_RESPONSE_ENDS = (b"response.completed", b"response.incomplete", b"response.failed")


def _data_of(event: bytes) -> Any:
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            text = line[5:].strip()
            if text == b"[DONE]":
                return "[DONE]"
            try:
                return json.loads(text)
            except ValueError:
                return None
    return None


class UsageTap:
    def __init__(self, fmt: str, *, drop_usage_chunk: bool = False) -> None:
        self.fmt = fmt
        self.drop = drop_usage_chunk and fmt == "openai"
        self.usage = Usage()
        self.complete = False
        self._buf = b""
        self._anthropic_in: dict[str, Any] = {}
        self._anthropic_out = 0

    def feed(self, chunk: bytes) -> bytes:
        """Take raw bytes from the provider; return the bytes to forward to the client."""
        self._buf += chunk.replace(b"\r\n", b"\n") if b"\r" in chunk else chunk
        if b"\n\n" not in self._buf:
            return b"" if self.drop else chunk
        *events, self._buf = self._buf.split(b"\n\n")
        kept = [e for e in events if self._event(e)]
        if self.drop:
            return b"".join(e + b"\n\n" for e in kept)
        return chunk

    def flush(self) -> bytes:
        rest, self._buf = self._buf, b""
        if rest.strip() and self._event(rest):
            return rest if self.drop else b""
        return b""

    def _event(self, event: bytes) -> bool:
        """Record what the event says; False when it must not be forwarded."""
        if self.fmt == "responses":
            if any(end in event for end in _RESPONSE_ENDS):
                data = _data_of(event)
                if isinstance(data, dict):
                    self.usage = responses_usage((data.get("response") or {}).get("usage"))
                    self.complete = True
            return True
        if self.fmt == "openai":
            if b"[DONE]" in event:
                self.complete = True
                return True
            if b'"usage"' not in event or b'"usage":null' in event or b'"usage": null' in event:
                return True
            data = _data_of(event)
            if isinstance(data, dict) and data.get("usage"):
                self.usage = openai_usage(data["usage"])
                self.complete = True
                return not (self.drop and not data.get("choices"))
            return True
        if b"message_start" in event or b"message_delta" in event:
            data = _data_of(event)
            if isinstance(data, dict):
                if data.get("type") == "message_start":
                    self._anthropic_in = dict((data.get("message") or {}).get("usage") or {})
                    self._anthropic_out = int(self._anthropic_in.get("output_tokens") or 0)
                elif data.get("type") == "message_delta":
                    u = data.get("usage") or {}
                    self._anthropic_out = int(u.get("output_tokens") or self._anthropic_out)
                    for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                        if u.get(k) is not None:
                            self._anthropic_in[k] = u[k]
                self.usage = anthropic_usage({**self._anthropic_in, "output_tokens": self._anthropic_out})
        elif b"message_stop" in event:
            self.complete = True
        return True


class EventReader:
    """Raw stream bytes in, decoded ``data`` payloads out (JSON objects, or ``"[DONE]"``)."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[Any]:
        self._buf += chunk.replace(b"\r\n", b"\n") if b"\r" in chunk else chunk
        if b"\n\n" not in self._buf:
            return []
        *events, self._buf = self._buf.split(b"\n\n")
        return [d for d in map(_data_of, events) if d is not None]

    def flush(self) -> list[Any]:
        rest, self._buf = self._buf, b""
        data = _data_of(rest) if rest.strip() else None
        return [] if data is None else [data]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def openai_stream(response: ChatResponse, *, completion_id: str, created: int, include_usage: bool) -> list[bytes]:
    """A finished answer as chat-completion chunks (used when translating between formats)."""
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": response.model}
    out: list[bytes] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        body: dict[str, Any] = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        out.append(_sse(body))

    chunk({"role": "assistant", "content": response.content or ""})
    for i, call in enumerate(response.tool_calls):
        chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                ]
            }
        )
    chunk({}, response.finish_reason)
    if include_usage:
        u = response.usage
        out.append(
            _sse(
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": u.input_tokens,
                        "completion_tokens": u.output_tokens,
                        "total_tokens": u.total_tokens,
                        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
                    },
                }
            )
        )
    out.append(b"data: [DONE]\n\n")
    return out


def anthropic_stream(response: ChatResponse, *, message_id: str) -> list[bytes]:
    """A finished answer as Messages stream events (used when translating between formats)."""
    full = to_anthropic_response(response, message_id=message_id)
    usage = full["usage"]
    start = {**full, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    out = [_sse({"type": "message_start", "message": start}, "message_start")]
    for i, block in enumerate(full["content"]):
        if block["type"] == "text":
            out.append(
                _sse(
                    {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                    "content_block_start",
                )
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            out.append(_sse({"type": "content_block_start", "index": i, "content_block": empty}, "content_block_start"))
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(_sse({"type": "content_block_delta", "index": i, "delta": delta}, "content_block_delta"))
        out.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out
