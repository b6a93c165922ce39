"""OpenAI chat-completions response bodies and stream chunks for a rendered reply.

Usage follows OpenAI's convention: ``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``,
and cached tokens are reported in multiples of 128.
"""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.sim.conversation import tokens_for_chars
from agent_fleet.sim.wire import RenderedReply, SimUsage, split_text

__all__ = ["openai_body", "openai_chunks", "openai_usage"]

_FINGERPRINT = "fp_sim0001"
_ARGUMENT_PIECE = 256


def openai_usage(usage: SimUsage) -> dict[str, Any]:
    cached = (usage.cached_tokens // 128) * 128
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish_reason(reply: RenderedReply) -> str:
    return "tool_calls" if reply.calls else "stop"


def openai_body(reply: RenderedReply, usage: SimUsage, *, model: str, created: int) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None, "annotations": []}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": "call_" + c.id_suffix,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json},
            }
            for c in reply.calls
        ]
    body = {
        "id": "chatcmpl-" + reply.response_suffix,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}],
        "usage": openai_usage(usage),
        "service_tier": "default",
        "system_fingerprint": _FINGERPRINT,
    }
    return json.dumps(body, ensure_ascii=False).encode()


def openai_chunks(
    reply: RenderedReply, usage: SimUsage, *, model: str, created: int, include_usage: bool
) -> list[tuple[bytes, int]]:
    """Server-sent events for a streamed answer, each with the output tokens it carries (for pacing)."""
    head = {
        "id": "chatcmpl-" + reply.response_suffix,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": _FINGERPRINT,
    }

    def event(choices: list[dict[str, Any]], usage_value: dict[str, Any] | None = None) -> bytes:
        obj = dict(head)
        obj["choices"] = choices
        if include_usage:
            obj["usage"] = usage_value
        return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"

    def delta(d: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}]

    out: list[tuple[bytes, int]] = []
    first: dict[str, Any] = {"role": "assistant", "content": "" if reply.text is not None else None, "refusal": None}
    out.append((event(delta(first)), 0))
    for piece in split_text(reply.text or ""):
        out.append((event(delta({"content": piece})), tokens_for_chars(len(piece))))
    for i, call in enumerate(reply.calls):
        start = {
            "tool_calls": [
                {
                    "index": i,
                    "id": "call_" + call.id_suffix,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
        }
        out.append((event(delta(start)), 1))
        args = call.arguments_json
        for pos in range(0, len(args), _ARGUMENT_PIECE):
            piece = args[pos : pos + _ARGUMENT_PIECE]
            out.append(
                (
                    event(delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})),
                    tokens_for_chars(len(piece)),
                )
            )
    out.append((event(delta({}, _finish_reason(reply))), 0))
    if include_usage:
        out.append((event([], openai_usage(usage)), 0))
    out.append((b"data: [DONE]\n\n", 0))
    return out
