"""Helpers (no tests) for the simulated-provider integration tests: tool schemas and SDK-driven agent loops.

The loops play the part of the harness: they execute ``read_file`` against the bundled demo codebase
(scoped to the partition) and record every model call.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

import agent_fleet

DEMO = pathlib.Path(agent_fleet.__file__).parent / "samples" / "demo-repo"

_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "submit_result": (
        "Submit results.",
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string"},
                            "body": {"type": "string"},
                            "category": {"type": "string"},
                            "confidence": {"type": "number"},
                            "location": {"type": "string"},
                        },
                        "required": ["title", "body"],
                    },
                }
            },
            "required": ["items"],
        },
    ),
    "finish": ("End the session.", {"type": "object", "properties": {"summary": {"type": "string"}}}),
    "read_file": ("Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
    "list_files": ("List the partition's files.", {"type": "object", "properties": {}}),
    "grep": ("Search the partition.", {"type": "object", "properties": {"pattern": {"type": "string"}}}),
}
LIST_TOOLS = ("submit_result", "finish")
DIR_TOOLS = ("submit_result", "finish", "read_file", "list_files", "grep")


def openai_tools(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": n, "description": _SCHEMAS[n][0], "parameters": _SCHEMAS[n][1]}}
        for n in names
    ]


def anthropic_tools(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"name": n, "description": _SCHEMAS[n][0], "input_schema": _SCHEMAS[n][1]} for n in names]


def files_message(paths: list[str]) -> str:
    return "Task: review this code for bugs and risky patterns\n\nFiles:\n" + "\n".join(f"- {p}" for p in paths)


def items_message(items: list[str]) -> str:
    return "Task: write a short note on each item\n\nItems:\n" + "\n".join(items)


def demo_python_files() -> list[str]:
    return sorted(p.relative_to(DEMO).as_posix() for p in DEMO.rglob("*.py"))


@dataclass
class Trace:
    """What one simulated session did, call by call."""

    calls: list[list[tuple[str, str, dict[str, Any]]]] = field(default_factory=list)  # (id, name, args)
    usages: list[Any] = field(default_factory=list)
    submitted: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    final_text: str | None = None


def _execute(name: str, args: dict[str, Any], partition: set[str], trace: Trace) -> str:
    if name == "read_file":
        path = str(args.get("path", ""))
        if path not in partition or not (DEMO / path).is_file():
            return f"Error: {path} is not readable in this partition"
        return (DEMO / path).read_text()
    if name == "submit_result":
        trace.submitted.extend(args["items"])
        return f"accepted {len(args['items'])} results"
    if name == "finish":
        trace.summary = args.get("summary")
        return "finished"
    return "Error: tool not supported here"


async def openai_stream_once(client: openai.AsyncOpenAI, **kwargs: Any) -> tuple[dict[str, Any], Any, list[Any]]:
    """One streamed call, accumulated into (assistant message, usage, chunks)."""
    stream = await client.chat.completions.create(stream=True, **kwargs)
    chunks = [chunk async for chunk in stream]
    content: str | None = None
    calls: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content is not None:
                content = (content or "") + delta.content
            for tc in delta.tool_calls or ():
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    return message, usage, chunks


async def run_openai_session(
    client: openai.AsyncOpenAI,
    first_message: str,
    *,
    tools: tuple[str, ...],
    partition: set[str] | None = None,
    stream: bool = False,
    max_turns: int = 12,
) -> Trace:
    trace = Trace()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are one agent of a fleet."},
        {"role": "user", "content": first_message},
    ]
    for _ in range(max_turns):
        kwargs: dict[str, Any] = {"model": "gpt-4.1-mini", "messages": messages, "tools": openai_tools(tools)}
        if stream:
            message, usage, _ = await openai_stream_once(client, stream_options={"include_usage": True}, **kwargs)
        else:
            response = await client.chat.completions.create(**kwargs)
            message = response.choices[0].message.model_dump(
                exclude_none=True, include={"role", "content", "tool_calls"}
            )
            message.setdefault("content", None)
            usage = response.usage
        trace.usages.append(usage)
        messages.append(message)
        tool_calls = message.get("tool_calls") or []
        if not tool_calls:
            trace.final_text = message.get("content")
            return trace
        turn = []
        for tc in tool_calls:
            args = json.loads(tc["function"]["arguments"])
            turn.append((tc["id"], tc["function"]["name"], args))
            result = _execute(tc["function"]["name"], args, partition or set(), trace)
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": result})
        trace.calls.append(turn)
        if trace.summary is not None:
            return trace
    raise AssertionError("the session did not finish")


async def run_anthropic_session(
    client: anthropic.AsyncAnthropic,
    first_message: str,
    *,
    tools: tuple[str, ...],
    partition: set[str] | None = None,
    stream: bool = False,
    max_turns: int = 12,
) -> Trace:
    trace = Trace()
    messages: list[dict[str, Any]] = [{"role": "user", "content": first_message}]
    for _ in range(max_turns):
        kwargs: dict[str, Any] = {
            "model": "claude-sim",
            "max_tokens": 8192,
            "system": "You are one agent of a fleet.",
            "messages": messages,
            "tools": anthropic_tools(tools),
        }
        if stream:
            async with client.messages.stream(**kwargs) as s:
                message = await s.get_final_message()
        else:
            message = await client.messages.create(**kwargs)
        trace.usages.append(message.usage)
        blocks = [b.model_dump(include={"type", "text", "id", "name", "input"}) for b in message.content]
        messages.append({"role": "assistant", "content": blocks})
        uses = [b for b in message.content if b.type == "tool_use"]
        if not uses:
            assert message.stop_reason == "end_turn"
            trace.final_text = "".join(b.text for b in message.content if b.type == "text")
            return trace
        assert message.stop_reason == "tool_use"
        turn = []
        results = []
        for block in uses:
            args = dict(block.input)  # type: ignore[arg-type]
            turn.append((block.id, block.name, args))
            result = _execute(block.name, args, partition or set(), trace)
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": result,
                    "is_error": result.startswith("Error"),
                }
            )
        messages.append({"role": "user", "content": results})
        trace.calls.append(turn)
        if trace.summary is not None:
            return trace
    raise AssertionError("the session did not finish")
