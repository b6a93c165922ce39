"""Responses API answers written from chat-completions answers: the ``response`` object
(:func:`chat_to_response`) and the event stream (:class:`ResponsesStream`). See
:mod:`agent_fleet.spend.responses` for the request side and the event sequence.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

__all__ = ["ResponsesStream", "chat_chunks", "chat_to_response", "new_id", "text_of"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def text_of(content: Any) -> str:
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
        output.append(_text_item(new_id("msg"), text_of(message["content"]), "completed"))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        output.append(
            _call_item(
                new_id("fc"),
                str(call.get("id") or new_id("call")),
                name,
                str(fn.get("arguments") or ""),
                custom=name in custom,
                status="completed",
            )
        )
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    doc = _response_doc(
        request,
        ident=new_id("resp"),
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
            request, ident=new_id("resp"), created=created, model=model, status="in_progress", output=[]
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
        item = _text_item(new_id("msg"), "", "in_progress")
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
            new_id(prefix),
            str(call.get("id") or new_id("call")),
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
        yield {"choices": [{"index": 0, "delta": {"content": text_of(message["content"])}}]}
    for i, call in enumerate(message.get("tool_calls") or ()):
        yield {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, **call}]}}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}]}
    if chat.get("usage"):
        yield {"choices": [], "usage": chat["usage"]}
