"""The raw prompt-size estimate every plane shares: characters at 3 a token, plus a few per message.

English runs near 4 characters a token and code near 3, so it starts high. The gateway calibrates it
per model (:mod:`agent_fleet.spend.estimate`); the harness uses it raw to keep a conversation inside
its model's context window.
"""

from __future__ import annotations

from typing import Any

from agent_fleet.domain.model import ChatRequest, ToolSpec

__all__ = ["CHARS_PER_TOKEN", "PER_MESSAGE", "PER_REQUEST", "message_chars", "raw_prompt_estimate", "tools_chars"]

CHARS_PER_TOKEN = 3
PER_MESSAGE = 8
PER_REQUEST = 16


def message_chars(msg: dict[str, Any]) -> int:
    """The characters of one chat message the estimate counts (content and tool-call arguments)."""
    chars = 0
    content = msg.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif content:
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                chars += len(text) if isinstance(text, str) else len(str(part.get("content") or ""))
            else:
                chars += len(str(part))
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        chars += len(fn.get("name") or "") + len(fn.get("arguments") or "")
    return chars


# Every request of every session counts its tools' schemas twice (context care, the gateway's
# reservation), and the specs are a handful of constants: each one is measured once, by identity.
_SPEC_CHARS: dict[int, tuple[ToolSpec, int]] = {}


def _spec_chars(spec: ToolSpec) -> int:
    seen = _SPEC_CHARS.get(id(spec))
    if seen is not None and seen[0] is spec:
        return seen[1]
    chars = len(spec.name) + len(spec.description) + len(repr(spec.parameters))
    if len(_SPEC_CHARS) >= 4096:  # specs built per request (the gateway service): keep the memo small
        _SPEC_CHARS.clear()
    _SPEC_CHARS[id(spec)] = (spec, chars)
    return chars


def tools_chars(tools: tuple[ToolSpec, ...]) -> int:
    return sum(_spec_chars(t) for t in tools)


def raw_prompt_estimate(request: ChatRequest) -> int:
    chars = sum(message_chars(m) for m in request.messages) + tools_chars(request.tools)
    return chars // CHARS_PER_TOKEN + PER_MESSAGE * len(request.messages) + PER_REQUEST
