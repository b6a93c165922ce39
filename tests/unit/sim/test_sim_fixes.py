"""The simulated agent's edits: mechanical fixes as exact-text edits, through the built-in protocol and
each coding CLI's own edit tool. Pure functions: the same input always gives the same edits."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_fleet.sim.behaviour import decide
from agent_fleet.sim.coding import coding_reply
from agent_fleet.sim.conversation import from_anthropic, from_openai
from agent_fleet.sim.detectors import detect
from agent_fleet.sim.fixes import FIXABLE, Edit, apply_edits, plan_edits

SOURCE = (
    "import yaml\n\n\n"
    "def load(text, seen=[]):\n"
    '    """Load it."""\n'
    "    try:\n"
    "        return yaml.load(text) == None\n"
    "    except:\n"
    "        return None\n\n\n"
    "def again(x):\n"
    "    try:\n"
    "        return x\n"
    "    except:\n"
    "        return None\n"
)
FIXED = (
    "import yaml\n\n\n"
    "def load(text, seen=None):\n"
    '    """Load it."""\n'
    "    if seen is None:\n"
    "        seen = []\n"
    "    try:\n"
    "        return yaml.safe_load(text) is None\n"
    "    except Exception:\n"
    "        return None\n\n\n"
    "def again(x):\n"
    "    try:\n"
    "        return x\n"
    "    except Exception:\n"
    "        return None\n"
)


def test_each_fix_is_an_edit_of_text_that_occurs_once() -> None:
    edits = plan_edits("m.py", SOURCE, detect("m.py", SOURCE))
    assert apply_edits(SOURCE, edits) == FIXED
    # the two `except:` blocks read alike: each edit carries enough lines to be unique
    for e in edits:
        assert SOURCE.count(e.old) == 1, e
    assert [e.line for e in edits] == sorted(e.line for e in edits)
    assert plan_edits("m.py", SOURCE, detect("m.py", SOURCE)) == edits  # deterministic
    assert not [f for f in detect("m.py", FIXED) if f.rule in FIXABLE]


def test_what_is_not_mechanical_is_left_alone() -> None:
    text = (
        "def f(a: list = []):\n    return a\n\n\n"  # annotated: no fix
        'def g(b=[]):\n    """Doc\n    more."""\n    return b\n\n\n'  # a multi-line docstring: no fix
        "cfg = yaml.load(s, Loader=yaml.FullLoader)\n"  # a Loader of its own: no fix
        "h = hashlib.md5(data)\n"  # changes the digest: not a fix
    )
    found = detect("m.py", text)
    assert {f.rule for f in found} >= {"mutable-default", "yaml-load", "weak-hash"}
    assert plan_edits("m.py", text, found) == []


BLOCKS = [
    "def f{i}(x, seen=[]):\n    return seen\n",
    "def g{i}(x, opts={{}}, more=list()):\n    'One line.'\n    return opts\n",
    "try:\n    run()\nexcept:\n    pass\n",
    "if value == None:\n    value = 0\n",
    "if value != None and other == None:\n    value = 1\n",
    "requests.get(url, verify=False)\n",
    "data = yaml.load(text)\n",
    "x = 1\n",
    "\n",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(BLOCKS) - 1), st.integers(0, 2)), min_size=1, max_size=25))
def test_any_file_of_fixable_lines_is_fixed_by_edits_that_apply_in_order(picks: list[tuple[int, int]]) -> None:
    text = "import requests, yaml\n" + "".join(BLOCKS[b].format(i=i) for b, i in picks)
    edits = plan_edits("m.py", text, detect("m.py", text))
    fixed = text
    for e in edits:
        assert fixed.count(e.old) == 1  # exactly one occurrence when it is applied, as edit_file demands
        fixed = fixed.replace(e.old, e.new, 1)
    compile(fixed, "m.py", "exec")
    assert not [f for f in detect("m.py", fixed) if f.rule in FIXABLE], fixed
    assert fixed.count("x = 1\n") == text.count("x = 1\n")


# -- the built-in agent -------------------------------------------------------------------------------

EDIT_TOOLS = ("submit_result", "finish", "read_file", "list_files", "grep", "write_file", "edit_file", "run")


def openai_request(messages: list[dict[str, Any]], names: tuple[str, ...] = EDIT_TOOLS) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]
    return {"model": "sim", "messages": messages, "tools": tools}


def calls_message(calls: tuple[tuple[str, dict[str, Any]], ...], prefix: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"{prefix}{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)
        ],
    }


def answered(
    messages: list[dict[str, Any]], calls: tuple[tuple[str, dict[str, Any]], ...], prefix: str, outputs: list[str]
) -> None:
    messages.append(calls_message(calls, prefix))
    messages += [{"role": "tool", "tool_call_id": f"{prefix}{i}", "content": out} for i, out in enumerate(outputs)]


def test_the_built_in_agent_reports_then_fixes_with_edit_file_when_edits_are_on() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Task: fix\n\nFiles:\n- m.py\n- clean.py"}]
    read = decide(from_openai(openai_request(messages)), edits=True)
    answered(messages, read.calls, "r", [SOURCE, "x = 1\n"])
    submit = decide(from_openai(openai_request(messages)), edits=True)
    assert [n for n, _ in submit.calls] == ["submit_result"]
    # without edits (the default) the next turn is the end, as before
    answered(messages, submit.calls, "s", ["accepted"])
    assert [n for n, _ in decide(from_openai(openai_request(messages))).calls] == ["finish"]
    edit = decide(from_openai(openai_request(messages)), edits=True)
    assert edit == decide(from_openai(openai_request(messages)), edits=True)  # the same reply, every time
    expected = plan_edits("m.py", SOURCE, detect("m.py", SOURCE))
    assert edit.calls == tuple(("edit_file", {"path": "m.py", "old": e.old, "new": e.new}) for e in expected)
    # without edit_file offered (a run that makes no changes) there is nothing to edit with
    assert [n for n, _ in decide(from_openai(openai_request(messages, EDIT_TOOLS[:5])), edits=True).calls] == ["finish"]
    answered(messages, edit.calls, "e", ["replaced 1 occurrence"] * (len(expected) - 1) + ["error: refused"])
    done = decide(from_openai(openai_request(messages)), edits=True)
    assert done.calls[0][0] == "finish"
    assert f"Made {len(expected) - 1} of {len(expected)} edits" in done.calls[0][1]["summary"]


# -- the coding CLIs' own edit tools ------------------------------------------------------------------


def claude_request(*later: dict[str, Any]) -> dict[str, Any]:
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("Bash", "Edit", "Read", "ReportFindings")]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "Primary working directory: /w/s1"}],
        "tools": tools,
        "messages": [{"role": "user", "content": "Fix these.\nFiles:\n- pkg/m.py"}, *later],
    }


def test_claude_code_edits_with_its_edit_tool_then_reports() -> None:
    first = coding_reply(from_anthropic(claude_request()), edits=True)
    assert first is not None and first.calls == (("Read", {"file_path": "/w/s1/pkg/m.py"}),)
    # as Claude Code's Read numbers lines: the file's last newline shows as an empty last line
    numbered = "\n".join(f"{n}\t{line}" for n, line in enumerate(SOURCE.split("\n"), 1))
    turns = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t0", "name": "Read", "input": first.calls[0][1]}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": numbered}]},
    ]
    turns[0]["content"][0]["input"] = first.calls[0][1]
    edit = coding_reply(from_anthropic(claude_request(*turns)), edits=True)
    assert edit is not None
    expected = plan_edits("pkg/m.py", SOURCE, detect("pkg/m.py", SOURCE))
    want = [("Edit", {"file_path": "/w/s1/pkg/m.py", "old_string": e.old, "new_string": e.new}) for e in expected]
    assert list(edit.calls) == want
    turns += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"e{i}", "name": n, "input": a} for i, (n, a) in enumerate(want)],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"e{i}", "content": "updated"} for i in range(len(want))
            ],
        },
    ]
    report = coding_reply(from_anthropic(claude_request(*turns)), edits=True)
    assert report is not None and [n for n, _ in report.calls] == ["ReportFindings"]
    plain = coding_reply(from_anthropic(claude_request(*turns[:2])))
    assert plain is not None and [n for n, _ in plain.calls] == ["ReportFindings"]  # edits off: as before


def test_codex_patch_and_aider_blocks_are_in_their_tools_formats() -> None:
    edits = [Edit("a.py", "    except:\n        pass\n", "    except Exception:\n        pass\n", 3)]
    from agent_fleet.sim.coding import aider_blocks, codex_patch

    assert codex_patch(edits) == (
        "*** Begin Patch\n*** Update File: a.py\n@@\n-    except:\n-        pass\n"
        "+    except Exception:\n+        pass\n*** End Patch"
    )
    assert aider_blocks(edits) == (
        "a.py\n```python\n<<<<<<< SEARCH\n    except:\n        pass\n=======\n"
        "    except Exception:\n        pass\n>>>>>>> REPLACE\n```"
    )
