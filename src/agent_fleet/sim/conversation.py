"""A provider-neutral view of one chat request, read from either wire format.

Both the OpenAI chat-completions body and the Anthropic Messages body are reduced to the same
:class:`Conversation`, so the simulated agent behaves identically behind both endpoints. The
conversation also carries what the server needs for accounting: a prompt-token estimate and a chain of
prefix digests (digest of everything up to and including message *k*) used for tool-call ids and for the
simulated prompt cache.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_fleet.errors import FleetError

__all__ = [
    "BadRequest",
    "Conversation",
    "build_conversation",
    "SimMessage",
    "SimToolCall",
    "SimToolResult",
    "from_anthropic",
    "from_openai",
    "looks_like_error",
    "openai_conversation",
    "require_model",
    "tokens_for_chars",
]

# Per-message framing the real tokenizers add (role markers, separators).
_MESSAGE_OVERHEAD = 4
_REQUEST_OVERHEAD = 3


class BadRequest(FleetError):
    """The request body is not a valid chat request; answered with HTTP 400."""


def tokens_for_chars(chars: int) -> int:
    return math.ceil(chars / 4)


@dataclass(frozen=True, slots=True)
class SimToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str


@dataclass(frozen=True, slots=True)
class SimToolResult:
    call_id: str
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class SimMessage:
    role: str  # "user" | "assistant" | "tool" | "system" (a mid-conversation system turn)
    text: str
    tool_calls: tuple[SimToolCall, ...] = ()
    result: SimToolResult | None = None

    def chars(self) -> int:
        n = len(self.text)
        for call in self.tool_calls:
            n += len(call.name) + len(call.raw_arguments)
        if self.result is not None:
            n += len(self.result.content)
        return n

    def canonical(self) -> bytes:
        parts = [self.role, self.text]
        for call in self.tool_calls:
            parts += ["call", call.id, call.name, call.raw_arguments]
        if self.result is not None:
            parts += ["result", self.result.call_id, self.result.content, "1" if self.result.is_error else "0"]
        return "\x1e".join(parts).encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Conversation:
    model: str
    system: str
    messages: tuple[SimMessage, ...]
    tools: tuple[str, ...]
    parallel_tool_calls: bool
    stream: bool
    include_usage: bool
    prompt_tokens: int
    # chain[k] = (digest of the request up to and including message k, prompt tokens of that prefix)
    chain: tuple[tuple[bytes, int], ...]

    @property
    def digest(self) -> bytes:
        """Identifies the whole conversation (messages, system prompt, tools offered)."""
        return self.chain[-1][0] if self.chain else _root_digest(self.system, "", ())

    def first_user_text(self) -> str:
        for msg in self.messages:
            if msg.role == "user":
                return msg.text
        return ""

    def user_texts(self) -> list[str]:
        return [m.text for m in self.messages if m.role == "user"]

    def context_text(self) -> str:
        """The system prompt and every system turn, in order."""
        return "\n".join([self.system, *(m.text for m in self.messages if m.role == "system")])


def looks_like_error(text: str) -> bool:
    """Whether a tool result reads as an error (the OpenAI format has no error flag)."""
    head = text.lstrip()[:64].lower()
    return head.startswith(("error", "tool error", "exception", "traceback", "permission denied", '{"error"'))


def _root_digest(system: str, tools_json: str, tool_names: tuple[str, ...]) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(system.encode("utf-8", "surrogatepass"))
    h.update(b"\x1d")
    h.update(tools_json.encode("utf-8", "surrogatepass"))
    h.update(b"\x1d")
    h.update("\x1e".join(tool_names).encode())
    return h.digest()


def build_conversation(  # every wire format's parser ends here
    *,
    model: str,
    system: str,
    messages: list[SimMessage],
    tool_names: tuple[str, ...],
    tools_json: str,
    parallel: bool,
    stream: bool,
    include_usage: bool,
) -> Conversation:
    base = _REQUEST_OVERHEAD + tokens_for_chars(len(tools_json))
    if system:
        base += tokens_for_chars(len(system)) + _MESSAGE_OVERHEAD
    digest = _root_digest(system, tools_json, tool_names)
    total = base
    chain: list[tuple[bytes, int]] = []
    for msg in messages:
        total += tokens_for_chars(msg.chars()) + _MESSAGE_OVERHEAD
        digest = hashlib.blake2b(digest + msg.canonical(), digest_size=16).digest()
        chain.append((digest, total))
    return Conversation(
        model=model,
        system=system,
        messages=tuple(messages),
        tools=tool_names,
        parallel_tool_calls=parallel,
        stream=stream,
        include_usage=include_usage,
        prompt_tokens=total,
        chain=tuple(chain),
    )


def _text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of parts/blocks of which text ones count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type") == "text":
                out.append(str(part.get("text", "")))
        return "\n".join(out)
    raise BadRequest("message content must be a string or a list of content parts")


def _parse_args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _require_messages(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array")
    return messages


def require_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required")
    return model


def from_openai(body: dict[str, Any]) -> Conversation:
    model = require_model(body)
    raw_messages = _require_messages(body)
    system_parts: list[str] = []
    messages: list[SimMessage] = []
    for raw in raw_messages:
        if not isinstance(raw, dict):
            raise BadRequest("each message must be an object")
        role = raw.get("role")
        if role in ("system", "developer"):
            system_parts.append(_text_of(raw.get("content")))
        elif role == "user":
            messages.append(SimMessage("user", _text_of(raw.get("content"))))
        elif role == "assistant":
            calls: list[SimToolCall] = []
            for tc in raw.get("tool_calls") or ():
                if not isinstance(tc, dict):
                    raise BadRequest("each tool call must be an object")
                fn = tc.get("function") or {}
                raw_args = fn.get("arguments") or ""
                if not isinstance(raw_args, str):
                    raw_args = json.dumps(raw_args)
                calls.append(
                    SimToolCall(str(tc.get("id", "")), str(fn.get("name", "")), _parse_args(raw_args), raw_args)
                )
            messages.append(SimMessage("assistant", _text_of(raw.get("content")), tuple(calls)))
        elif role in ("tool", "function"):
            text = _text_of(raw.get("content"))
            call_id = str(raw.get("tool_call_id") or raw.get("name") or "")
            messages.append(SimMessage("tool", "", (), SimToolResult(call_id, text, looks_like_error(text))))
        else:
            raise BadRequest(f"unsupported message role {role!r}")
    stream_options = body.get("stream_options") or {}
    include_usage = bool(isinstance(stream_options, dict) and stream_options.get("include_usage"))
    return openai_conversation(body, model, system_parts, messages, _function_names, include_usage=include_usage)


def _function_names(tools: list[Any]) -> list[str]:
    names: list[str] = []
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BadRequest("each tool must be {'type': 'function', 'function': {'name': ...}}")
        names.append(fn["name"])
    return names


def openai_conversation(
    body: dict[str, Any],
    model: str,
    system: list[str],
    messages: list[SimMessage],
    tool_names: Callable[[list[Any]], list[str]],
    *,
    include_usage: bool,
) -> Conversation:
    """What an OpenAI-format request (chat completions or Responses) says beyond its messages: its
    ``tools`` (named by ``tool_names``; none callable with ``tool_choice`` ``none``), whether tool
    calls may come in parallel and whether to stream."""
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be an array")
    names = tool_names(tools)
    return build_conversation(
        model=model,
        system="\n".join(system),
        messages=messages,
        tool_names=() if body.get("tool_choice") == "none" else tuple(names),
        tools_json=json.dumps(tools, separators=(",", ":")) if tools else "",
        parallel=body.get("parallel_tool_calls", True) is not False,
        stream=bool(body.get("stream")),
        include_usage=include_usage,
    )


def from_anthropic(body: dict[str, Any]) -> Conversation:
    model = require_model(body)
    raw_messages = _require_messages(body)
    if not isinstance(body.get("max_tokens"), int):
        raise BadRequest("max_tokens: Field required")
    messages: list[SimMessage] = []
    for raw in raw_messages:
        if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant", "system"):
            raise BadRequest("messages: each message needs role 'user', 'assistant' or 'system'")
        content = raw.get("content")
        if raw["role"] == "system":  # a mid-conversation system turn (Claude Code sends them)
            messages.append(SimMessage("system", _text_of(content)))
            continue
        if isinstance(content, str) or content is None:
            messages.append(SimMessage(raw["role"], content or ""))
            continue
        if not isinstance(content, list):
            raise BadRequest("message content must be a string or a list of content blocks")
        texts: list[str] = []
        calls: list[SimToolCall] = []
        results: list[SimMessage] = []
        for block in content:
            if not isinstance(block, dict):
                raise BadRequest("each content block must be an object")
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                given = block.get("input")
                args: dict[str, Any] = given if isinstance(given, dict) else {}
                raw_args = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
                calls.append(SimToolCall(str(block.get("id", "")), str(block.get("name", "")), args, raw_args))
            elif kind == "tool_result":
                text = _text_of(block.get("content"))
                is_error = bool(block.get("is_error")) or looks_like_error(text)
                results.append(
                    SimMessage("tool", "", (), SimToolResult(str(block.get("tool_use_id", "")), text, is_error))
                )
        if raw["role"] == "assistant":
            messages.append(SimMessage("assistant", "\n".join(texts), tuple(calls)))
        else:
            messages.extend(results)
            if texts:
                messages.append(SimMessage("user", "\n".join(texts)))
    system = body.get("system") or ""
    system_text = _text_of(system)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("tools: must be an array")
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise BadRequest("tools: each tool needs a name")
        names.append(tool["name"])
    choice = body.get("tool_choice")
    parallel = True
    if isinstance(choice, dict):
        if choice.get("type") == "none":
            names = []
        parallel = not choice.get("disable_parallel_tool_use", False)
    return build_conversation(
        model=model,
        system=system_text,
        messages=messages,
        tool_names=tuple(names),
        tools_json=json.dumps(tools, separators=(",", ":")) if tools else "",
        parallel=parallel,
        stream=bool(body.get("stream")),
        include_usage=True,
    )
