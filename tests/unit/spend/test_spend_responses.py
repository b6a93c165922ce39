"""Responses API ⇄ chat completions: the request mapping, the answer, and the event stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_fleet.domain.usage import Usage
from agent_fleet.spend.responses import (
    ResponsesStream,
    Unsupported,
    chat_chunks,
    chat_to_response,
    responses_to_chat,
    responses_usage,
)
from agent_fleet.spend.sse import EventReader

FN = {"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"}, "strict": False}
PATCH = {"type": "custom", "name": "apply_patch", "description": "edit files", "format": {"type": "grammar"}}


def test_items_become_messages_with_merged_tool_calls() -> None:
    body = {
        "model": "m",
        "instructions": "be careful",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev note"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd":"ls"}'},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "ok"}]},
        ],
        "tools": [FN, PATCH, {"type": "web_search"}],
        "tool_choice": {"type": "function", "name": "shell"},
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    chat, custom = responses_to_chat(body)
    assert custom == {"apply_patch"}
    assert chat["messages"] == [
        {"role": "system", "content": "be careful"},
        {"role": "system", "content": "dev note"},
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"ls"}'}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "apply_patch", "arguments": '{"input": "*** Begin Patch"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    ]
    assert [t["function"]["name"] for t in chat["tools"]] == ["shell", "apply_patch"]  # the hosted tool is dropped
    assert chat["tools"][1]["function"]["parameters"]["required"] == ["input"]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert (chat["parallel_tool_calls"], chat["temperature"], chat["stream"]) == (False, 0.2, True)
    assert chat["stream_options"] == {"include_usage": True}
    assert "max_tokens" not in chat  # none was asked for, none is made up


def test_limits_formats_and_state() -> None:
    chat, _ = responses_to_chat(
        {
            "model": "m",
            "input": "hi",
            "max_output_tokens": 300,
            "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}, "strict": True}},
        }
    )
    assert chat["messages"] == [{"role": "user", "content": "hi"}]
    assert chat["max_tokens"] == 300
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "r", "schema": {"type": "object"}, "strict": True},
    }
    with pytest.raises(Unsupported, match="previous_response_id"):
        responses_to_chat({"model": "m", "input": "hi", "previous_response_id": "resp_1"})
    with pytest.raises(Unsupported):
        responses_to_chat({"model": "m", "input": []})


CHAT = {
    "id": "chatcmpl-1",
    "created": 7,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Patching.",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"ls"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "apply_patch", "arguments": '{"input":"P"}'}},
                ],
            },
        }
    ],
    "usage": {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 5},
    },
}


def test_a_chat_answer_as_a_response_object() -> None:
    doc = chat_to_response(CHAT, {"model": "m", "tools": [FN, PATCH]}, custom={"apply_patch"})
    assert doc["object"] == "response" and doc["status"] == "completed" and doc["id"].startswith("resp_")
    message, call, patch = doc["output"]
    assert message["content"][0] == {"type": "output_text", "text": "Patching.", "annotations": [], "logprobs": []}
    assert (call["type"], call["call_id"], call["arguments"]) == ("function_call", "c1", '{"cmd":"ls"}')
    assert (patch["type"], patch["call_id"], patch["input"]) == ("custom_tool_call", "c2", "P")
    assert doc["usage"] == {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 64},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 150,
    }
    assert responses_usage(doc["usage"]) == Usage(120, 30, 64)
    cut = {**CHAT, "choices": [{**CHAT["choices"][0], "finish_reason": "length"}]}
    assert chat_to_response(cut, {}, custom=set())["status"] == "incomplete"


def _events(data: bytes) -> list[dict[str, Any]]:
    reader = EventReader()
    return [e for e in reader.feed(data) + reader.flush() if isinstance(e, dict)]


def test_the_event_stream_of_a_streamed_chat_answer() -> None:
    writer = ResponsesStream({"model": "m"}, model="m", created=7, custom={"apply_patch"})
    out = writer.start()
    pieces = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": "Patch"}}]},
        {"choices": [{"index": 0, "delta": {"content": "ing."}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "shell", "arguments": ""}}]},
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"cmd"'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ':"ls"}'}}]}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 1, "id": "c2", "function": {"name": "apply_patch", "arguments": '{"input":"P"}'}}
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": CHAT["usage"]},
    ]
    for chunk in pieces:
        out += writer.feed(chunk)
    out += writer.finish()
    events = _events(out)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    assert [o["type"] for o in final["output"]] == ["message", "function_call", "custom_tool_call"]
    assert final["output"][0]["content"][0]["text"] == "Patching."
    assert final["output"][1]["arguments"] == '{"cmd":"ls"}' and final["output"][2]["input"] == "P"
    assert final["usage"]["total_tokens"] == 150


def test_a_whole_answer_streams_the_same_as_its_chunks() -> None:
    a = ResponsesStream({"model": "m"}, model="m", created=7, custom=set())
    whole = a.start() + b"".join(a.feed(c) for c in chat_chunks(CHAT)) + a.finish()
    final = _events(whole)[-1]["response"]
    assert [o["type"] for o in final["output"]] == ["message", "function_call", "function_call"]
    assert json.loads(final["output"][2]["arguments"]) == {"input": "P"}  # not a custom tool here
    assert final["status"] == "completed" and final["usage"]["input_tokens"] == 120
