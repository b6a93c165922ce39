"""The simulated model answering a coding CLI: Codex CLI's Responses requests, as codex 0.171 sends them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_fleet.hands.cli_formats import items_from_text
from agent_fleet.sim.coding import coding_reply
from agent_fleet.sim.conversation import BadRequest
from agent_fleet.sim.detectors import detect
from agent_fleet.sim.wire_responses import from_responses

SOURCE = (
    "import hashlib\n\n\ndef load(text):\n    return eval(text)\n\n\n"
    "def digest(d):\n    return hashlib.md5(d).hexdigest()\n"
)

# Codex's tools: functions, a namespace of functions, and a hosted tool the model never calls.
CODEX_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "strict": False, "parameters": {"type": "object"}},
    {"type": "function", "name": "write_stdin", "strict": False, "parameters": {"type": "object"}},
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "sub-agents",
        "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}],
    },
    {"type": "web_search", "external_web_access": True},
]


def message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def codex_request(*later: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "gpt-4.1-mini",
        "stream": True,
        "tools": CODEX_TOOLS,
        "input": [
            message("developer", "You are a coding agent running in the Codex CLI."),
            message(
                "user", "<environment_context>\n  <cwd>/work/s1</cwd>\n  <shell>bash</shell>\n</environment_context>"
            ),
            message("user", "Review these files for bugs.\nFiles:\n- pkg/a.py\n- pkg/b.py"),
            *later,
        ],
        "reasoning": {"summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }


def test_codex_request_reads_its_partition_with_the_shell_tool_then_reports_each_finding() -> None:
    conv = from_responses(codex_request())
    assert conv.tools == ("exec_command", "write_stdin", "multi_agent_v1.spawn_agent")
    first = coding_reply(conv)
    assert first is not None and first.text is None
    assert first.calls == (("exec_command", {"cmd": "cat pkg/a.py"}), ("exec_command", {"cmd": "cat pkg/b.py"}))
    later: list[dict[str, Any]] = []
    for n, (_, args) in enumerate(first.calls):
        later.append(
            {"type": "function_call", "call_id": f"c{n}", "name": "exec_command", "arguments": json.dumps(args)}
        )
    for n in range(2):
        output = f"Chunk ID: x\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n{SOURCE}"
        later.append({"type": "function_call_output", "call_id": f"c{n}", "output": output})
    final = coding_reply(from_responses(codex_request(*later)))
    assert final is not None and final.calls == () and final.text is not None
    # a markdown list, as Codex's model writes for a person: one result per finding, at its place
    items = [(i["title"], i["location"]) for i in items_from_text(final.text)]
    expected = [(f.title, f.location) for p in ("pkg/a.py", "pkg/b.py") for f in detect(p, SOURCE)]
    assert items == expected and len(items) >= 4


def test_a_tool_without_its_name_is_a_bad_request() -> None:
    body = codex_request()
    body["tools"] = [{"type": "namespace", "tools": []}]
    with pytest.raises(BadRequest):
        from_responses(body)
    body["tools"] = [{"name": "x"}]
    with pytest.raises(BadRequest):
        from_responses(body)
