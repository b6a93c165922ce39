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
from typing import Any

from agent_fleet.domain.usage import Usage
from agent_fleet.spend.responses_out import ResponsesStream, chat_chunks, chat_to_response, text_of

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


def _user_content(content: Any) -> Any:
    """A user message's content: plain text, or chat parts when it carries images."""
    if isinstance(content, str) or not any(isinstance(p, dict) and p.get("type") == "input_image" for p in content):
        return text_of(content)
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
                messages.append({"role": "system", "content": text_of(content)})
            elif role == "assistant":
                messages.append({"role": "assistant", "content": text_of(content)})
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
            text = output if isinstance(output, str) else text_of(output)
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
        messages.append({"role": "system", "content": text_of(instructions)})
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
