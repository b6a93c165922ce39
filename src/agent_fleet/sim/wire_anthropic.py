"""Anthropic Messages response bodies and stream events for a rendered reply.

Usage follows Anthropic's convention: ``input_tokens`` excludes ``cache_read_input_tokens``. The stream
is ``message_start``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
``input_json_delta``) / ``content_block_stop``, then ``message_delta`` (stop reason, output usage) and
``message_stop``.
"""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.sim.conversation import tokens_for_chars
from agent_fleet.sim.wire import RenderedReply, SimUsage, split_text

__all__ = ["anthropic_body", "anthropic_events", "anthropic_usage"]

_ARGUMENT_PIECE = 256


def anthropic_usage(usage: SimUsage, *, output_tokens: int | None = None) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens - usage.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.completion_tokens if output_tokens is None else output_tokens,
        "service_tier": "standard",
    }


def _stop_reason(reply: RenderedReply) -> str:
    return "tool_use" if reply.calls else "end_turn"


def _blocks(reply: RenderedReply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text is not None:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.calls:
        blocks.append({"type": "tool_use", "id": "toolu_" + call.id_suffix, "name": call.name, "input": call.arguments})
    return blocks


def _message(
    reply: RenderedReply, model: str, content: list[dict[str, Any]], usage: dict[str, Any], stop_reason: str | None
) -> dict[str, Any]:
    return {
        "id": "msg_" + reply.response_suffix,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def anthropic_body(reply: RenderedReply, usage: SimUsage, *, model: str) -> bytes:
    msg = _message(reply, model, _blocks(reply), anthropic_usage(usage), _stop_reason(reply))
    return json.dumps(msg, ensure_ascii=False).encode()


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


def anthropic_events(reply: RenderedReply, usage: SimUsage, *, model: str) -> list[tuple[bytes, int]]:
    """Server-sent events for a streamed answer, each with the output tokens it carries (for pacing)."""
    out: list[tuple[bytes, int]] = []
    # As on the real API, the stop reason is unknown at message_start and arrives in message_delta.
    start = _message(reply, model, [], anthropic_usage(usage, output_tokens=1), None)
    out.append((_sse("message_start", {"type": "message_start", "message": start}), 0))
    out.append((_sse("ping", {"type": "ping"}), 0))
    index = 0
    block: dict[str, Any]
    if reply.text is not None:
        block = {"type": "text", "text": ""}
        out.append(
            (_sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}), 0)
        )
        for piece in split_text(reply.text):
            delta = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
            out.append((_sse("content_block_delta", delta), tokens_for_chars(len(piece))))
        out.append((_sse("content_block_stop", {"type": "content_block_stop", "index": index}), 0))
        index += 1
    for call in reply.calls:
        block = {"type": "tool_use", "id": "toolu_" + call.id_suffix, "name": call.name, "input": {}}
        out.append(
            (_sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}), 1)
        )
        args = call.arguments_json
        for pos in range(0, len(args), _ARGUMENT_PIECE):
            piece = args[pos : pos + _ARGUMENT_PIECE]
            delta = {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            out.append((_sse("content_block_delta", delta), tokens_for_chars(len(piece))))
        out.append((_sse("content_block_stop", {"type": "content_block_stop", "index": index}), 0))
        index += 1
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
        "usage": {"output_tokens": usage.completion_tokens},
    }
    out.append((_sse("message_delta", message_delta), 0))
    out.append((_sse("message_stop", {"type": "message_stop"}), 0))
    return out
