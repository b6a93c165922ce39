from __future__ import annotations

import json
from decimal import Decimal

import pytest

from agent_fleet.domain.usage import Usage
from agent_fleet.errors import UsageError
from agent_fleet.hands.cli_agents import CliAgentSpec, render_command
from agent_fleet.hands.cli_formats import authentication_failed, items_from_text, parse_output

CLAUDE = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 2267,
    "num_turns": 1,
    "result": '{"title": "SQL injection", "body": "user input in query", "location": "db.py:12"}',
    "session_id": "8b5de1fc",
    "total_cost_usd": 0.18780875,
    "usage": {
        "input_tokens": 3,
        "cache_creation_input_tokens": 30015,
        "cache_read_input_tokens": 100,
        "output_tokens": 8,
        "server_tool_use": {"web_search_requests": 0},
        "service_tier": "standard",
    },
    "modelUsage": {
        "claude-opus-4-6": {
            "inputTokens": 3,
            "outputTokens": 8,
            "cacheReadInputTokens": 100,
            "cacheCreationInputTokens": 30015,
            "costUSD": 0.18780875,
        }
    },
}


def test_claude_result_object() -> None:
    rep = parse_output("claude", json.dumps(CLAUDE))
    assert rep.usage == Usage(input_tokens=30118, output_tokens=8, cached_input_tokens=100, cache_write_tokens=30015)
    assert rep.cost_usd == Decimal("0.18780875")
    assert rep.model_usage["claude-opus-4-6"] == rep.usage
    assert rep.items == ({"title": "SQL injection", "body": "user input in query", "location": "db.py:12"},)
    assert rep.error is None


def test_claude_error_and_plain_text_result() -> None:
    err = parse_output("claude", json.dumps({**CLAUDE, "is_error": True, "subtype": "error_max_budget_usd"}))
    assert err.error == "error_max_budget_usd" and err.items == () and err.cost_usd == Decimal("0.18780875")
    plain = parse_output("claude", json.dumps({**CLAUDE, "result": "No issues found.\nAll good."}))
    assert plain.items == ({"title": "No issues found.", "body": "No issues found.\nAll good."},)
    assert parse_output("claude", "not json").error == "no result object on stdout"


def test_codex_events_sum_turn_usage() -> None:
    events = [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "thinking"}},
        {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "first pass"}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 26549, "cached_input_tokens": 22272, "output_tokens": 1590},
        },
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i2", "item_type": "assistant_message", "text": "final answer"}},
        {"type": "turn.completed", "usage": {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 10}},
    ]
    rep = parse_output("codex", "\n".join(json.dumps(e) for e in events) + "\nstray line\n")
    assert rep.usage == Usage(input_tokens=26649, output_tokens=1600, cached_input_tokens=22272)
    assert rep.final_text == "final answer"
    assert rep.items == ({"title": "final answer", "body": "final answer"},)
    assert rep.cost_usd is None and rep.error is None
    failed = parse_output("codex", json.dumps({"type": "turn.failed", "error": {"message": "quota"}}))
    assert failed.error == "quota"


def test_aider_analytics_log() -> None:
    def ev(name: str, **props: object) -> str:
        return json.dumps({"event": name, "properties": props, "user_id": "u", "time": 1})

    log = "\n".join(
        [
            ev("launched"),
            ev("message_send", prompt_tokens=1000, completion_tokens=50, total_tokens=1050, cost=0.01, total_cost=0.01),
            ev("message_send", prompt_tokens=2000, completion_tokens=70, total_tokens=2070, cost=0.02, total_cost=0.03),
            "garbage",
        ]
    )
    stdout = 'Tokens: 2k sent\n{"title": "t", "body": "b", "confidence": 0.9}\n'
    rep = parse_output("aider", stdout, analytics_log=log)
    assert rep.usage == Usage(input_tokens=3000, output_tokens=120)
    assert rep.cost_usd == Decimal("0.03")
    assert rep.items == ({"title": "t", "body": "b", "confidence": 0.9},)


def test_jsonl_keeps_valid_items_only() -> None:
    out = "\n".join(
        [
            json.dumps({"title": "A", "body": "a", "category": "bug", "confidence": 0.7, "severity": "high"}),
            json.dumps({"title": "", "body": "no title"}),
            json.dumps({"title": "B"}),
            json.dumps({"title": "C", "body": "c", "confidence": 7}),
            "progress 50%",
            "[1, 2]",
        ]
    )
    rep = parse_output("jsonl", out)
    assert rep.items == (
        {"severity": "high", "title": "A", "body": "a", "category": "bug", "confidence": 0.7},
        {"title": "C", "body": "c"},
    )
    assert rep.usage == Usage()


def test_items_from_text_forms() -> None:
    assert items_from_text("") == []
    assert items_from_text('[{"title": "x", "body": "y"}]') == [{"title": "x", "body": "y"}]
    assert items_from_text('{"items": [{"title": "x", "body": "y"}]}') == [{"title": "x", "body": "y"}]


def test_render_command_quotes_placeholders() -> None:
    cmd = render_command(
        "agent -p {task} --list {partition} --log {analytics_log} --keep {braces}",
        task="find bugs; rm -rf / $(whoami) 'x'",
        partition_file="/w/.fleet-partition.txt",
        analytics_log="/w/a.jsonl",
    )
    assert cmd == (
        "agent -p 'find bugs; rm -rf / $(whoami) '\"'\"'x'\"'\"'' --list /w/.fleet-partition.txt "
        "--log /w/a.jsonl --keep {braces}"
    )


def test_spec_validation() -> None:
    with pytest.raises(UsageError, match="agent-format"):
        CliAgentSpec(command="x", format="yaml")
    with pytest.raises(UsageError):
        CliAgentSpec(command="  ")
    with pytest.raises(UsageError):
        parse_output("xml", "")


def test_claude_api_error_fails_and_findings_come_from_its_transcript() -> None:
    api = {**CLAUDE, "is_error": True, "subtype": "success", "result": "API Error: 401 invalid x-api-key"}
    assert parse_output("claude", json.dumps(api)).error == "API Error: 401 invalid x-api-key"
    finding = {"file": "a.py", "line": 3, "summary": "eval on input", "short_summary": "eval", "category": "security"}
    call = {"type": "tool_use", "id": "t1", "name": "ReportFindings", "input": {"findings": [finding, {"file": "b"}]}}
    entry = {"type": "assistant", "message": {"role": "assistant", "content": [call]}}
    transcript = "\n".join(json.dumps(e) for e in [{"type": "user"}, entry, entry])  # a repeated entry counts once
    done = {**CLAUDE, "session_id": "abc", "result": "Reported 1 finding."}
    rep = parse_output("claude", json.dumps(done), files={".claude/projects/-w/abc.jsonl": transcript})
    assert rep.items == ({"title": "eval", "body": "eval on input", "category": "security", "location": "a.py:3"},)
    assert rep.cli_session_id == "abc"
    # killed before it printed anything: the session id is still read from the transcript's name
    assert parse_output("claude", "", files={".claude/projects/-w/abc.jsonl": transcript}).cli_session_id == "abc"


def test_aider_history_gives_one_result_per_finding_edits_and_errors() -> None:
    f1 = json.dumps({"title": "Bare except", "body": "b1", "location": "a.py:4"})
    f2 = json.dumps({"title": "eval", "body": "b2", "location": "a.py:3"})
    edit = "a.py\n```python\n<<<<<<< SEARCH\n    except:\n=======\n    except ValueError:\n>>>>>>> REPLACE\n```"
    history = "\n".join(
        ["# aider chat started at 2025", "#### Review", f"Found two.\n{f1}\n{f2}\n{edit}", "> Applied edit to a.py"]
    )
    files = {
        ".aider.chat.history.md": history,
        "a.py": "def f(x):\n    try:\n        return 1\n    except ValueError:\n",
    }
    rep = parse_output("aider", "chatter", files=files)
    assert [i["title"] for i in rep.items] == ["Bare except", "eval", "Edited a.py"]
    assert rep.items[2]["location"] == "a.py:4" and rep.items[2]["category"] == "edit"
    assert rep.error is None and rep.cli_session_id == ".aider.chat.history.md"
    failed = "#### Review\n> litellm.AuthenticationError: AuthenticationError: OpenAIException - bad key\n"
    out = parse_output("aider", "", files={".aider.chat.history.md": failed})
    assert out.error is not None and out.error.startswith("litellm.AuthenticationError") and out.items == ()
    recovered = failed + "> Tokens: 1k sent, 20 received.\nAll good.\n"
    assert parse_output("aider", "", files={".aider.chat.history.md": recovered}).error is None


def test_refused_credentials_as_each_tool_reports_them() -> None:
    for said in (
        "Failed to authenticate. API Error: 401 invalid or missing gateway token",  # Claude Code
        "unexpected status 401 Unauthorized: invalid or missing gateway token, url: http://h/v1/responses",  # Codex
        "The API provider is not able to authenticate you. Check your API key.",  # aider
        "Invalid API key · Please run /login",
    ):
        assert authentication_failed(said), said
    for said in (None, "unexpected status 402 Payment Required: token budget exceeded", "error_max_turns", "a4010"):
        assert not authentication_failed(said), said
