"""A streamed chat completion read back into one answer.

The engine streams its calls where the server can (``spend.patience``: progress is what keeps a slow
call alive) but acts on whole answers: :func:`assemble` folds the ``data:`` events of an OpenAI chat
completions stream into the :class:`~agent_fleet.domain.model.ChatResponse` the same call would have
returned whole — text deltas joined, tool calls put together by their ``index`` (id and name from the
first delta that has them, arguments concatenated), the last ``finish_reason``, and the usage of the
chunk that carries one (servers put it in a chunk of its own or in the last one). Whether any usage
came is returned beside it: a server that sends none (``no_usage_chunk``) is not streamed again.
"""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.domain.model import ChatResponse, ToolCall
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import MalformedResponse, ProviderError
from agent_fleet.spend.providers._wire import error_from_status, load_json

__all__ = ["assemble", "openai_usage"]


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


def _events(body: bytes) -> list[Any]:
    out: list[Any] = []
    for line in body.replace(b"\r\n", b"\n").split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        text = line[5:].strip()
        if not text or text == b"[DONE]":
            continue
        try:
            out.append(load_json(text))
        except ValueError:
            continue
    return out


def assemble(body: bytes, *, host: str, model: str) -> tuple[ChatResponse, bool]:
    """The whole answer of a stream, and whether it carried usage. A stream that reports an error
    raises it as the provider's error; one with no chunk at all is a :class:`MalformedResponse`."""
    events = _events(body)
    if not events:
        start = body[:60].decode("utf-8", "replace").strip().replace("\n", " ")
        raise MalformedResponse(f"{host} answered 200 with a stream that has no chunks ({start!r})", status=200)
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = ""
    usage: dict[str, Any] | None = None
    answered_by = model
    for data in events:
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("error"), dict):  # an error in the middle of the stream
            err: ProviderError = error_from_status(host, _status(data["error"]), {}, _error_body(data))
            raise err
        if data.get("usage"):
            usage = data["usage"]
        answered_by = str(data.get("model") or answered_by)
        for choice in data.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(str(delta["content"]))
            for piece in delta.get("tool_calls") or ():
                slot = calls.setdefault(int(piece.get("index") or 0), {"id": "", "name": "", "arguments": []})
                slot["id"] = slot["id"] or str(piece.get("id") or "")
                fn = piece.get("function") or {}
                slot["name"] = slot["name"] or str(fn.get("name") or "")
                if fn.get("arguments"):
                    slot["arguments"].append(str(fn["arguments"]))
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    tool_calls = tuple(
        ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments="".join(c["arguments"]) or "{}")
        for i, c in sorted(calls.items())
    )
    response = ChatResponse(
        content="".join(text) if text else None,
        tool_calls=tool_calls,
        usage=openai_usage(usage),
        finish_reason=finish or ("tool_calls" if tool_calls else "stop"),
        model=answered_by,
    )
    return response, usage is not None


def _status(error: dict[str, Any]) -> int:
    code = error.get("code")
    return code if isinstance(code, int) and 400 <= code < 600 else 500


def _error_body(data: dict[str, Any]) -> bytes:
    return json.dumps({"error": data["error"]}).encode()
