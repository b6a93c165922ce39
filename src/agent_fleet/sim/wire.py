"""What both wire formats share: a rendered reply with stable ids, usage, and error bodies.

Tool-call ids and response ids are derived from the conversation digest, so the same request gets the
same ids no matter what traffic came before it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from agent_fleet.sim.behaviour import Reply
from agent_fleet.sim.conversation import Conversation, tokens_for_chars

__all__ = [
    "RenderedCall",
    "RenderedReply",
    "SimUsage",
    "anthropic_error",
    "openai_error",
    "render",
    "split_text",
]

_TOKENS_PER_CALL = 3
_TOKENS_PER_REPLY = 1


@dataclass(frozen=True, slots=True)
class RenderedCall:
    id_suffix: str
    name: str
    arguments: dict[str, Any]
    arguments_json: str


@dataclass(frozen=True, slots=True)
class RenderedReply:
    response_suffix: str
    text: str | None
    calls: tuple[RenderedCall, ...]
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class SimUsage:
    """Token figures of one answer. ``cached_tokens`` is the raw cached prefix size, before any rounding."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


def _suffix(digest: bytes, label: bytes) -> str:
    return hashlib.blake2b(digest + label, digest_size=12).hexdigest()


def render(conv: Conversation, reply: Reply) -> RenderedReply:
    digest = conv.digest
    calls: list[RenderedCall] = []
    chars = len(reply.text or "")
    for i, (name, args) in enumerate(reply.calls):
        args_json = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        calls.append(RenderedCall(_suffix(digest, b"call%d" % i), name, args, args_json))
        chars += len(name) + len(args_json)
    completion = tokens_for_chars(chars) + _TOKENS_PER_REPLY + _TOKENS_PER_CALL * len(calls)
    return RenderedReply(_suffix(digest, b"response"), reply.text, tuple(calls), completion)


def split_text(text: str, *, words_per_piece: int = 4) -> list[str]:
    """Streaming pieces of a text, a few words each; joining them gives the text back exactly."""
    pieces: list[str] = []
    start = 0
    count = 0
    for i, ch in enumerate(text):
        if ch == " ":
            count += 1
            if count == words_per_piece:
                pieces.append(text[start : i + 1])
                start = i + 1
                count = 0
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def openai_error(message: str, *, type_: str, code: str | None = None, param: str | None = None) -> bytes:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return json.dumps(body).encode()


def anthropic_error(message: str, *, type_: str, request_id: str) -> bytes:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": request_id}
    return json.dumps(body).encode()
