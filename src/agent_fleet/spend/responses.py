"""The OpenAI Responses API (``POST /v1/responses``) in front of a provider that only has chat completions.

:func:`responses_to_chat` turns a Responses request body into a chat-completions body:

* ``instructions`` → a ``system`` message; ``input`` (a string, or items) → messages: ``message`` items
  (``input_text``/``output_text`` parts; ``developer`` as ``system``), ``function_call`` items →
  assistant ``tool_calls`` (consecutive calls merged into one assistant turn), ``function_call_output``
  → ``tool`` messages; ``reasoning`` items are dropped (a chat model cannot take them back);
* ``function`` tools as chat function tools; ``custom`` (free-form) tools as a function taking one
  string ``input``, whose calls come back as ``custom_tool_call`` items; hosted tools (web search, file
  search, …) are dropped, since only OpenAI runs them;
* ``max_output_tokens`` → ``max_tokens`` (only when the client sent it), ``temperature``, ``top_p``,
  ``parallel_tool_calls``, ``tool_choice``, ``text.format`` → ``response_format``.

``previous_response_id`` and ``conversation`` need server-side state and are refused (the client's own
format: a 400). The answer comes back as a ``response`` object (:func:`chat_to_response`); a stream as
the Responses event sequence (:class:`ResponsesStream`): ``response.created``, ``response.in_progress``,
per item ``response.output_item.added`` … ``response.output_text.delta`` /
``response.function_call_arguments.delta`` … ``response.output_item.done``, then
``response.completed`` (``response.incomplete`` when the output limit cut it) carrying the usage.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

from agent_fleet.domain.usage import Usage

__all__ = [
    "ResponsesStream",
    "Unsupported",
    "chat_chunks",
    "chat_to_response",
    "responses_to_chat",
    "responses_usage",
]

_CUSTOM_PARAMS = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the tool's free-form input"}},
    "required": ["input"],
}


class Unsupported(ValueError):
    """A Responses request this translation cannot serve (answered 400 in the Responses format)."""


def _ident(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    out: list[str] = []
    for part in content or ():
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("refusal"), str):
            out.append(part["refusal"])
    return "".join(out)


def _user_content(content: Any) -> Any:
    """A user message's content: plain text, or chat parts when it carries images."""
    if isinstance(content, str) or not any(isinstance(p, dict) and p.get("type") == "input_image" for p in content):
        return _text_of(content)
    parts: list[dict[str, Any]] = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "input_image" and p.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": p["image_url"], "detail": p.get("detail", "auto")}})
        elif isinstance(p.get("text"), str):
            parts.append({"type": "text", "text": p["text"]})
    return parts


def _call_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn a tool call joins: the last message when it is one, else a new one."""
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "assistant":
        return last
    msg: dict[str, Any] = {"role": "assistant", "content": None}
    messages.append(msg)
    return msg


def _input_messages(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise Unsupported("input must be a string or an array of input items")
    messages: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            raise Unsupported("each input item must be an object")
        kind = item.get("type") or ("message" if "role" in item else "")
        if kind == "message":
            role = str(item.get("role") or "user")
            content = item.get("content")
            if role in ("system", "developer"):
                messages.append({"role": "system", "content": _text_of(content)})
            elif role == "assistant":
                messages.append({"role": "assistant", "content": _text_of(content)})
            else:
                messages.append({"role": "user", "content": _user_content(content)})
        elif kind in ("function_call", "custom_tool_call"):
            custom = kind == "custom_tool_call"
            arguments = json.dumps({"input": item.get("input", "")}) if custom else item.get("arguments") or "{}"
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": arguments},
            }
            _call_message(messages).setdefault("tool_calls", []).append(call)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else _text_of(output)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
        elif kind == "item_reference":
            raise Unsupported("item_reference needs stored responses, which this provider does not keep")
        # reasoning items, hosted tool calls: nothing a chat model can take back
    return messages


def _tools(tools: Any) -> tuple[list[dict[str, Any]], set[str]]:
    chat: list[dict[str, Any]] = []
    custom: set[str] = set()
    for tool in tools or ():
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind == "function":
            fn: dict[str, Any] = {"name": tool.get("name"), "description": tool.get("description") or ""}
            fn["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
            if tool.get("strict") is not None:
                fn["strict"] = tool["strict"]
            chat.append({"type": "function", "function": fn})
        elif kind == "custom":
            custom.add(str(tool.get("name")))
            desc = tool.get("description") or ""
            chat.append(
                {
                    "type": "function",
                    "function": {"name": tool.get("name"), "description": desc, "parameters": _CUSTOM_PARAMS},
                }
            )
    return chat, custom


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom") and choice.get("name"):
        return {"type": "function", "function": {"name": choice["name"]}}
    return "auto"


def responses_to_chat(body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """(a chat-completions body, the names of custom tools) for a Responses request body."""
    for stateful in ("previous_response_id", "conversation"):
        if body.get(stateful):
            raise Unsupported(f"{stateful} needs stored responses; send the whole input instead (store: false)")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions:
        messages.append({"role": "system", "content": _text_of(instructions)})
    messages += _input_messages(body.get("input", []))
    if not messages:
        raise Unsupported("input is empty")
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    tools, custom = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
        if body.get("tool_choice") is not None:
            chat["tool_choice"] = _tool_choice(body["tool_choice"])
        if body.get("parallel_tool_calls") is not None:
            chat["parallel_tool_calls"] = bool(body["parallel_tool_calls"])
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            chat[key] = body[key]
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        chat["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat, custom


def responses_usage(raw: dict[str, Any] | None) -> Usage:
    """Responses usage: ``input_tokens`` includes ``input_tokens_details.cached_tokens``."""
    if not raw:
        return Usage()
    details = raw.get("input_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
    )


def _usage_doc(chat_usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if not chat_usage:
        return None
    prompt = int(chat_usage.get("prompt_tokens") or 0)
    completion = int(chat_usage.get("completion_tokens") or 0)
    cached = int((chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((chat_usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + completion,
    }


def _response_doc(
    request: dict[str, Any], *, ident: str, created: int, model: str, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": request.get("temperature", 1.0),
        "text": request.get("text") or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": request.get("metadata") or {},
    }


def _text_item(ident: str, text: str, status: str) -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"id": ident, "type": "message", "status": status, "role": "assistant", "content": content}


def _call_item(ident: str, call_id: str, name: str, arguments: str, *, custom: bool, status: str) -> dict[str, Any]:
    if custom:
        try:
            value = json.loads(arguments or "{}")
        except ValueError:
            value = {}
        text = value.get("input") if isinstance(value, dict) else None
        return {
            "id": ident,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "input": text if isinstance(text, str) else (arguments if status == "completed" else ""),
        }
    return {
        "id": ident,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def chat_to_response(
    chat: dict[str, Any], request: dict[str, Any], *, custom: set[str], model: str | None = None
) -> dict[str, Any]:
    """A chat-completions answer as a Responses ``response`` object."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append(_text_item(_ident("msg"), _text_of(message["content"]), "completed"))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        output.append(
            _call_item(
                _ident("fc"),
                str(call.get("id") or _ident("call")),
                name,
                str(fn.get("arguments") or ""),
                custom=name in custom,
                status="completed",
            )
        )
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    doc = _response_doc(
        request,
        ident=_ident("resp"),
        created=int(chat.get("created") or 0),
        model=model or str(chat.get("model") or ""),
        status=status,
        output=output,
    )
    doc["usage"] = _usage_doc(chat.get("usage"))
    return doc


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


class ResponsesStream:
    """Chat-completions stream chunks in, Responses stream events out (as SSE bytes).

    ``start()`` first, ``feed(chunk)`` for each decoded chunk, ``finish()`` once the chat stream ended.
    ``usage`` holds the chat stream's usage once its last chunk has come.
    """

    def __init__(self, request: dict[str, Any], *, model: str, created: int, custom: set[str]) -> None:
        self._request = request
        self._custom = custom
        self._model = model
        self._doc = _response_doc(
            request, ident=_ident("resp"), created=created, model=model, status="in_progress", output=[]
        )
        self._seq = 0
        self._items: list[dict[str, Any]] = []
        self._text: tuple[int, list[str]] | None = None  # (output index, pieces) of the open message
        self._calls: dict[int, tuple[int, list[str]]] = {}  # chat tool index -> (output index, argument pieces)
        self._open_calls: list[int] = []
        self._finish: str | None = None
        self.usage_doc: dict[str, Any] | None = None

    def _event(self, kind: str, **data: Any) -> bytes:
        event = {"type": kind, "sequence_number": self._seq, **data}
        self._seq += 1
        return _sse(event)

    def start(self) -> bytes:
        return self._event("response.created", response=self._doc) + self._event(
            "response.in_progress", response=self._doc
        )

    def _open_text(self) -> bytes:
        index = len(self._items)
        item = _text_item(_ident("msg"), "", "in_progress")
        self._items.append(item)
        self._text = (index, [])
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return self._event("response.output_item.added", output_index=index, item=item) + self._event(
            "response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part
        )

    def _close_text(self) -> bytes:
        if self._text is None:
            return b""
        index, pieces = self._text
        self._text = None
        item = self._items[index]
        text = "".join(pieces)
        done = _text_item(item["id"], text, "completed")
        self._items[index] = done
        part = done["content"][0]
        return (
            self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            + self._event(
                "response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part
            )
            + self._event("response.output_item.done", output_index=index, item=done)
        )

    def _open_call(self, chat_index: int, call: dict[str, Any]) -> bytes:
        out = self._close_text() + self._close_calls()  # items stream one after the other
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        index = len(self._items)
        prefix = "ctc" if name in self._custom else "fc"
        item = _call_item(
            _ident(prefix),
            str(call.get("id") or _ident("call")),
            name,
            "",
            custom=name in self._custom,
            status="in_progress",
        )
        self._items.append(item)
        self._calls[chat_index] = (index, [])
        self._open_calls.append(chat_index)
        return out + self._event("response.output_item.added", output_index=index, item=item)

    def _close_calls(self) -> bytes:
        out = b""
        for chat_index in self._open_calls:
            index, pieces = self._calls[chat_index]
            item = self._items[index]
            arguments = "".join(pieces)
            custom = item["type"] == "custom_tool_call"
            done = _call_item(item["id"], item["call_id"], item["name"], arguments, custom=custom, status="completed")
            self._items[index] = done
            if custom:  # the input is known only once the wrapped arguments are whole
                out += self._event(
                    "response.custom_tool_call_input.delta", item_id=item["id"], output_index=index, delta=done["input"]
                )
                out += self._event(
                    "response.custom_tool_call_input.done", item_id=item["id"], output_index=index, input=done["input"]
                )
            else:
                out += self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=arguments,
                )
            out += self._event("response.output_item.done", output_index=index, item=done)
        self._open_calls = []
        return out

    def feed(self, chunk: dict[str, Any]) -> bytes:
        out = b""
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                if self._text is None:
                    if self._open_calls:
                        out += self._close_calls()
                    out += self._open_text()
                assert self._text is not None
                index, pieces = self._text
                pieces.append(content)
                out += self._event(
                    "response.output_text.delta",
                    item_id=self._items[index]["id"],
                    output_index=index,
                    content_index=0,
                    delta=content,
                    logprobs=[],
                )
            for call in delta.get("tool_calls") or ():
                chat_index = int(call.get("index") or 0)
                if chat_index not in self._calls:
                    out += self._open_call(chat_index, call)
                piece = (call.get("function") or {}).get("arguments")
                if piece:
                    index, pieces = self._calls[chat_index]
                    pieces.append(piece)
                    item = self._items[index]
                    if item["type"] == "function_call":
                        out += self._event(
                            "response.function_call_arguments.delta",
                            item_id=item["id"],
                            output_index=index,
                            delta=piece,
                        )
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
        if chunk.get("usage"):
            self.usage_doc = _usage_doc(chunk["usage"])
        return out

    def finish(self) -> bytes:
        out = self._close_text() + self._close_calls()
        status = "incomplete" if self._finish == "length" else "completed"
        doc = {**self._doc, "status": status, "output": list(self._items), "usage": self.usage_doc}
        if status == "incomplete":
            doc["incomplete_details"] = {"reason": "max_output_tokens"}
        return out + self._event(f"response.{status}", response=doc)


def chat_chunks(chat: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """A whole chat-completions answer as the stream chunks that would have carried it."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    if message.get("content"):
        yield {"choices": [{"index": 0, "delta": {"content": _text_of(message["content"])}}]}
    for i, call in enumerate(message.get("tool_calls") or ()):
        yield {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, **call}]}}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}]}
    if chat.get("usage"):
        yield {"choices": [], "usage": chat["usage"]}
