"""The simulated agent's turn-by-turn behaviour, as a pure function of the conversation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_fleet.sim.behaviour import LIST_CHUNK, MAX_READS_PER_TURN, decide, parse_partition
from agent_fleet.sim.conversation import BadRequest, from_anthropic, from_openai
from agent_fleet.sim.detectors import detect

AGENT_TOOLS = ("submit_result", "finish", "read_file", "list_files", "grep")


def tools(*names: str) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}} for n in names
    ]


def request(messages: list[dict[str, Any]], names: tuple[str, ...] = AGENT_TOOLS) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "sim", "messages": messages}
    if names:
        body["tools"] = tools(*names)
    return body


def files_task(paths: list[str]) -> dict[str, Any]:
    return {"role": "user", "content": "Task: review the code\n\nFiles:\n" + "\n".join(f"- {p}" for p in paths)}


def items_task(items: list[str]) -> dict[str, Any]:
    return {"role": "user", "content": "Task: summarise\n\nItems:\n" + "\n".join(items)}


def assistant(reply_calls: tuple[tuple[str, dict[str, Any]], ...], prefix: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"{prefix}{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(reply_calls)
        ],
    }


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_parse_partition_reads_items_and_files() -> None:
    assert parse_partition("Task: x\n\nItems:\nhttps://a.example/x\n\nplain line\n").entries == (
        "https://a.example/x",
        "plain line",
    )
    files = parse_partition("Task: look\n- not a file, part of the task\n\nFiles:\n- a.py\n- pkg/b.py\n")
    assert files.kind == "files"
    assert files.entries == ("a.py", "pkg/b.py")
    assert parse_partition("Task: x\n- a.py\n").entries == ("a.py",)
    assert parse_partition("just a question").kind == "none"


def test_directory_partition_reads_then_submits_detector_findings_then_finishes() -> None:
    sources = {
        "a.py": "def f(x=[]):\n    return x\n",
        "b.py": "x = 1\n",
        "c.py": "try:\n    g()\nexcept:\n    pass\n",
    }
    messages: list[dict[str, Any]] = [files_task(list(sources))]
    first = decide(from_openai(request(messages)))
    assert first.calls == tuple(("read_file", {"path": p}) for p in sources)
    messages.append(assistant(first.calls, "r"))
    messages += [tool_result(f"r{i}", text) for i, text in enumerate(sources.values())]
    second = decide(from_openai(request(messages)))
    assert [name for name, _ in second.calls] == ["submit_result"]
    items = second.calls[0][1]["items"]
    expected = [f.to_item() for path, text in sources.items() for f in detect(path, text)]
    assert items == expected and items
    assert {i["location"].split(":")[0] for i in items} == {"a.py", "c.py"}
    messages.append(assistant(second.calls, "s"))
    messages.append(tool_result("s0", "ok"))
    third = decide(from_openai(request(messages)))
    assert third.calls[0][0] == "finish"
    assert f"reported {len(items)} findings" in third.calls[0][1]["summary"]


def test_reads_are_capped_per_turn_and_continue_next_turn() -> None:
    paths = [f"m{i}.py" for i in range(MAX_READS_PER_TURN + 7)]
    messages: list[dict[str, Any]] = [files_task(paths)]
    first = decide(from_openai(request(messages)))
    assert len(first.calls) == MAX_READS_PER_TURN
    messages.append(assistant(first.calls, "a"))
    messages += [tool_result(f"a{i}", "x = 1\n") for i in range(len(first.calls))]
    second = decide(from_openai(request(messages)))
    assert [a["path"] for _, a in second.calls] == paths[MAX_READS_PER_TURN:]


def test_one_read_per_turn_without_parallel_tool_calls() -> None:
    body = request([files_task(["a.py", "b.py"])])
    body["parallel_tool_calls"] = False
    assert decide(from_openai(body)).calls == (("read_file", {"path": "a.py"}),)


def test_error_results_are_skipped_and_no_findings_goes_straight_to_finish() -> None:
    messages: list[dict[str, Any]] = [files_task(["bad.py", "ok.py"])]
    first = decide(from_openai(request(messages)))
    messages.append(assistant(first.calls, "r"))
    messages.append(tool_result("r0", "Error: bad.py is outside this partition"))
    messages.append(tool_result("r1", "x = 1\n"))
    reply = decide(from_openai(request(messages)))
    assert reply.calls[0][0] == "finish"
    assert "1 file could not be read" in reply.calls[0][1]["summary"]


def test_line_numbered_read_results_are_understood() -> None:
    messages: list[dict[str, Any]] = [files_task(["a.py"])]
    first = decide(from_openai(request(messages)))
    messages.append(assistant(first.calls, "r"))
    messages.append(tool_result("r0", "1\ttry:\n2\t    g()\n3\texcept:\n4\t    pass\n"))
    reply = decide(from_openai(request(messages)))
    assert reply.calls[0][1]["items"][0]["location"] == "a.py:3"


def test_list_partition_submits_in_chunks_then_finishes() -> None:
    items = [f"https://docs.example.org/guide/page-{i}" for i in range(7)] + ["the app crashes on start"] * 5
    messages: list[dict[str, Any]] = [items_task(items)]
    submitted: list[dict[str, Any]] = []
    for turn in range(10):
        reply = decide(from_openai(request(messages)))
        messages.append(assistant(reply.calls, f"t{turn}-"))
        name, args = reply.calls[0]
        if name == "finish":
            break
        assert name == "submit_result"
        assert len(args["items"]) <= LIST_CHUNK
        submitted += args["items"]
        messages.append(tool_result(f"t{turn}-0", "ok"))
    assert turn == 3  # 12 items: 5 + 5 + 2, then finish
    assert len(submitted) == len(items)
    assert submitted[0]["title"].startswith("docs.example.org: guide page")
    assert submitted[0]["category"] == "documentation"
    assert submitted[7]["category"] == "bug-report"
    # the same item verbatim gives the exact same result; items of one host differ only in detail
    assert submitted[7] == submitted[8]
    assert submitted[0]["body"] != submitted[1]["body"]


def test_ten_items_take_three_model_calls() -> None:
    messages: list[dict[str, Any]] = [items_task([f"line {i}" for i in range(10)])]
    names = []
    for turn in range(5):
        reply = decide(from_openai(request(messages)))
        names.append(reply.calls[0][0])
        if names[-1] == "finish":
            break
        messages.append(assistant(reply.calls, f"t{turn}-"))
        messages.append(tool_result(f"t{turn}-0", "ok"))
    assert names == ["submit_result", "submit_result", "finish"]


def test_verifier_share_of_refutations_follows_the_setting() -> None:
    verdicts = []
    for i in range(1000):
        body = request(
            [{"role": "user", "content": f"Judge this result: finding number {i} about module {i % 7}"}],
            ("submit_verdict",),
        )
        reply = decide(from_openai(body), refute_pct=10.0, unsure_pct=5.0)
        assert reply.calls[0][0] == "submit_verdict"
        verdicts.append(reply.calls[0][1]["verdict"])
    counts = {v: verdicts.count(v) for v in ("confirm", "refute", "unsure")}
    assert 60 <= counts["refute"] <= 140
    assert 20 <= counts["unsure"] <= 90
    body = request([{"role": "user", "content": "Judge: x"}], ("submit_verdict",))
    assert decide(from_openai(body), refute_pct=100.0, unsure_pct=0.0).calls[0][1]["verdict"] == "refute"
    assert decide(from_openai(body), refute_pct=0.0, unsure_pct=0.0).calls[0][1]["verdict"] == "confirm"


def test_without_tools_the_answer_is_deterministic_prose() -> None:
    body = request([{"role": "user", "content": "Summarise the report about billing errors"}], ())
    first = decide(from_openai(body))
    assert first.calls == ()
    assert first.text is not None and "billing" in first.text
    assert decide(from_openai(body)) == first


def test_an_uncovered_conversation_finishes() -> None:
    reply = decide(from_openai(request([{"role": "user", "content": "hello"}])))
    assert reply.calls[0][0] == "finish"


def test_anthropic_and_openai_conversations_get_the_same_reply() -> None:
    paths = ["a.py"]
    openai_body = request([files_task(paths)])
    anthropic_body = {
        "model": "sim",
        "max_tokens": 1024,
        "messages": [files_task(paths)],
        "tools": [{"name": n, "input_schema": {"type": "object"}} for n in AGENT_TOOLS],
    }
    assert decide(from_openai(openai_body)) == decide(from_anthropic(anthropic_body))


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m"},
        {"model": "m", "messages": []},
        {"messages": [{"role": "user", "content": "x"}]},
        {"model": "m", "messages": [{"role": "wizard", "content": "x"}]},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
    ],
)
def test_malformed_openai_requests_are_rejected(body: dict[str, Any]) -> None:
    with pytest.raises(BadRequest):
        from_openai(body)


def test_anthropic_requires_max_tokens() -> None:
    with pytest.raises(BadRequest):
        from_anthropic({"model": "m", "messages": [{"role": "user", "content": "x"}]})


def test_more_findings_than_one_submit_holds_are_submitted_over_several_turns() -> None:
    from agent_fleet.sim.behaviour import MAX_ITEMS_PER_SUBMIT

    source = "".join(f"x{i} = 1  # TODO: item {i}\n" for i in range(30))
    paths = [f"m{i}.py" for i in range(10)]  # 300 findings
    messages: list[dict[str, Any]] = [files_task(paths)]
    reads = decide(from_openai(request(messages)))
    messages.append(assistant(reads.calls, "r"))
    messages += [tool_result(f"r{i}", source) for i in range(len(paths))]
    sizes = []
    for turn in range(5):
        reply = decide(from_openai(request(messages)))
        name, args = reply.calls[0]
        if name == "finish":
            assert args["summary"] == "Reviewed 10 files and reported 300 findings."
            break
        sizes.append(len(args["items"]))
        messages.append(assistant(reply.calls, f"s{turn}-"))
        messages.append(tool_result(f"s{turn}-0", "ok"))
    assert sizes == [MAX_ITEMS_PER_SUBMIT, 300 - MAX_ITEMS_PER_SUBMIT]


def test_a_loop_marker_makes_the_agent_read_the_same_file_again() -> None:
    content = "x = 1\n# fleet-sim: loop 3\n"
    messages: list[dict[str, Any]] = [files_task(["a.py"])]
    reads = 0
    for turn in range(10):
        reply = decide(from_openai(request(messages)))
        names = [n for n, _ in reply.calls]
        if names != ["read_file"]:
            break
        assert reply.calls[0][1] == {"path": "a.py"}
        reads += 1
        messages += [assistant(reply.calls, f"t{turn}-"), tool_result(f"t{turn}-0", content)]
    assert reads == 3 and names == ["finish"]
