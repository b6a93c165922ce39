"""The OpenAI Responses API of the simulated provider: requests in, ``response`` objects and streams out.

A request (``instructions``, ``input`` as a string or items — ``message``, ``function_call``,
``function_call_output`` — and ``function`` tools) reads into the same :class:`Conversation` as the chat
formats, so the simulated agent answers it alike. The answer is a ``response`` object whose ``output``
holds a ``message`` item (``output_text``) and ``function_call`` items; usage follows OpenAI's
convention (``input_tokens`` includes ``input_tokens_details.cached_tokens``, a multiple of 128). The
stream is ``response.created``, ``response.in_progress``, per item ``response.output_item.added`` …
deltas … ``response.output_item.done``, and ``response.completed`` carrying the usage. There is no
``[DONE]`` line: the completed event ends the stream.
"""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.sim.conversation import (
    BadRequest,
    Conversation,
    SimMessage,
    SimToolCall,
    SimToolResult,
    looks_like_error,
    openai_conversation,
    require_model,
    tokens_for_chars,
)
from agent_fleet.sim.wire import RenderedReply, SimUsage, split_text

__all__ = ["from_responses", "responses_body", "responses_events", "responses_usage"]

_ARGUMENT_PIECE = 256


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest("content must be a string or an array of content parts")
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))


def _args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _messages(items: list[Any], system: list[str]) -> list[SimMessage]:
    messages: list[SimMessage] = []
    for item in items:
        if not isinstance(item, dict):
            raise BadRequest("each input item must be an object")
        kind = item.get("type") or ("message" if "role" in item else "")
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                system.append(_text(item.get("content")))
            elif role in ("user", "assistant"):
                messages.append(SimMessage(str(role), _text(item.get("content"))))
            else:
                raise BadRequest(f"unsupported input role {role!r}")
        elif kind == "function_call":
            raw = str(item.get("arguments") or "")
            call = SimToolCall(str(item.get("call_id", "")), str(item.get("name", "")), _args(raw), raw)
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                messages[-1] = SimMessage("assistant", last.text, (*last.tool_calls, call))
            else:
                messages.append(SimMessage("assistant", "", (call,)))
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output)
            result = SimToolResult(str(item.get("call_id", "")), text, looks_like_error(text))
            messages.append(SimMessage("tool", "", (), result))
        elif kind != "reasoning":
            raise BadRequest(f"unsupported input item type {kind!r}")
    return messages


def _tool_names(tools: list[Any]) -> list[str]:
    """The names of the ``function`` tools the model may call, also those inside a ``namespace``
    (``namespace.name``); hosted tools (``web_search`` and the like) are offered but never called."""
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise BadRequest("each tool must be an object with a 'type'")
        kind = tool["type"]
        if kind in ("function", "custom", "namespace") and not isinstance(tool.get("name"), str):
            raise BadRequest(f"a {kind!r} tool needs a 'name'")
        if kind == "function":
            names.append(tool["name"])
        elif kind == "namespace":
            inner = tool.get("tools")
            if not isinstance(inner, list):
                raise BadRequest("a 'namespace' tool needs its 'tools'")
            names.extend(f"{tool['name']}.{n}" for n in _tool_names(inner))
    return names


def from_responses(body: dict[str, Any]) -> Conversation:
    model = require_model(body)
    raw_input = body.get("input")
    system: list[str] = []
    if body.get("instructions"):
        system.append(_text(body["instructions"]))
    if isinstance(raw_input, str):
        messages = [SimMessage("user", raw_input)]
    elif isinstance(raw_input, list) and raw_input:
        messages = _messages(raw_input, system)
    else:
        raise BadRequest("'input' must be a string or a non-empty array of items")
    return openai_conversation(body, model, system, messages, _tool_names, include_usage=True)


def responses_usage(usage: SimUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": (usage.cached_tokens // 128) * 128},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def _output(reply: RenderedReply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text is not None:
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": "msg_" + reply.response_suffix,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for call in reply.calls:
        items.append(
            {
                "id": "fc_" + call.id_suffix,
                "type": "function_call",
                "status": "completed",
                "call_id": "call_" + call.id_suffix,
                "name": call.name,
                "arguments": call.arguments_json,
            }
        )
    return items


def _response(
    reply: RenderedReply,
    request: dict[str, Any],
    *,
    model: str,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": "resp_" + reply.response_suffix,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": bool(request.get("store", True)),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def responses_body(
    reply: RenderedReply, usage: SimUsage, request: dict[str, Any], *, model: str, created: int
) -> bytes:
    doc = _response(
        reply,
        request,
        model=model,
        created=created,
        status="completed",
        output=_output(reply),
        usage=responses_usage(usage),
    )
    return json.dumps(doc, ensure_ascii=False).encode()


def responses_events(
    reply: RenderedReply, usage: SimUsage, request: dict[str, Any], *, model: str, created: int
) -> list[tuple[bytes, int]]:
    """Server-sent events for a streamed answer, each with the output tokens it carries (for pacing)."""
    out: list[tuple[bytes, int]] = []
    seq = 0

    def event(kind: str, tokens: int = 0, **data: Any) -> None:
        nonlocal seq
        payload = json.dumps({"type": kind, "sequence_number": seq, **data}, ensure_ascii=False)
        out.append((f"event: {kind}\ndata: {payload}\n\n".encode(), tokens))
        seq += 1

    start = _response(reply, request, model=model, created=created, status="in_progress", output=[], usage=None)
    event("response.created", response=start)
    event("response.in_progress", response=start)
    final = _output(reply)
    for index, item in enumerate(final):
        if item["type"] == "message":
            item_id = item["id"]
            event(
                "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
            )
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            event("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=empty)
            for piece in split_text(reply.text or ""):
                event(
                    "response.output_text.delta",
                    tokens_for_chars(len(piece)),
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            text = reply.text or ""
            event(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            event(
                "response.content_part.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        else:
            event(
                "response.output_item.added",
                1,
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            args = item["arguments"]
            for pos in range(0, len(args), _ARGUMENT_PIECE):
                piece = args[pos : pos + _ARGUMENT_PIECE]
                event(
                    "response.function_call_arguments.delta",
                    tokens_for_chars(len(piece)),
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            event("response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=args)
        event("response.output_item.done", output_index=index, item=item)
    done = _response(
        reply, request, model=model, created=created, status="completed", output=final, usage=responses_usage(usage)
    )
    event("response.completed", response=done)
    return out
