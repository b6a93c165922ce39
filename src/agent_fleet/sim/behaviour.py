"""The simulated agent: what the model says next, as a pure function of the conversation so far.

It follows the built-in agent's tool protocol (SPEC.md): a directory partition is read with
``read_file`` (at most 25 calls per turn), reviewed by the deterministic detectors and reported with
one ``submit_result`` (several only beyond 200 findings) — with ``edits``, and ``edit_file`` offered,
then fixes what has a mechanical fix (:mod:`~agent_fleet.sim.fixes`: all of a turn's edits in
one turn, at most 25, one a turn without parallel tool calls) — a file with a ``fleet-sim: loop N`` line is
read again until it was read N times, one call a turn (an agent that loops its tool calls); a list
partition is answered five items per ``submit_result``; then ``finish``. A task with a
``fleet-sim: pages N`` line is a long session: one ``read_file`` a turn (``page`` 1..N, cycling through
the partition's files; the progress is read from the last page asked for, so it survives a trimmed
or compacted conversation), then one ``submit_result`` and ``finish`` (N + 2 turns). A compaction
request (the harness's summary prompt) gets a one-line summary. A verifier request
(``submit_verdict`` offered) gets one verdict. Without tools the answer is prose. Coding CLIs (Claude
Code, Codex CLI, aider) are answered as :mod:`agent_fleet.sim.coding` describes. Nothing here
reads a clock or an RNG, so the same conversation always gets the same reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from agent_fleet.sim.coding import coding_reply
from agent_fleet.sim.conversation import Conversation, SimToolCall
from agent_fleet.sim.detectors import Finding, detect
from agent_fleet.sim.fixes import Edit, plan_edits
from agent_fleet.sim.items import (
    COMPACT_PREFIX,
    compaction_summary,
    note_for_item,
    plain_answer,
    plan_for_goal,
    verdict_for,
)

__all__ = [
    "LIST_CHUNK",
    "MAX_ITEMS_PER_SUBMIT",
    "MAX_READS_PER_TURN",
    "Partition",
    "Reply",
    "decide",
    "parse_partition",
]

MAX_READS_PER_TURN = 25
LIST_CHUNK = 5
# Findings go in one submit_result call; only a partition with more than this many takes several.
MAX_ITEMS_PER_SUBMIT = 200

_NUMBERED_LINE = re.compile(r"^\s*\d+(\t|: |\| ?)")
_LOOP = re.compile(r"fleet-sim:\s*loop\s+(\d+)")
_PAGES = re.compile(r"fleet-sim:\s*pages\s+(\d+)")


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant turn: prose, tool calls (name, arguments), or both."""

    text: str | None
    calls: tuple[tuple[str, dict[str, Any]], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Partition:
    kind: Literal["files", "items", "none"]
    entries: tuple[str, ...]


@lru_cache(maxsize=2048)
def parse_partition(text: str) -> Partition:
    """Read the partition from the first user message (``Items:`` lines, or ``- path`` lines)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        header = line.strip()
        if header == "Items:":
            return Partition("items", tuple(x for x in lines[i + 1 :] if x.strip()))
        if header == "Files:":
            return Partition("files", _dash_paths(lines[i + 1 :]))
    paths = _dash_paths(lines)
    return Partition("files", paths) if paths else Partition("none", ())


def _dash_paths(lines: list[str]) -> tuple[str, ...]:
    return tuple(s[2:].strip() for s in (x.strip() for x in lines) if s.startswith("- ") and s[2:].strip())


def _normalise_file_text(content: str) -> str:
    """The file text inside a ``read_file`` result: unwrap a JSON envelope, drop a line-number gutter."""
    if content.startswith("{"):
        try:
            data = json.loads(content)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("content"), str):
            content = data["content"]
    lines = content.splitlines()
    non_empty = [x for x in lines if x.strip()]
    if non_empty and sum(1 for x in non_empty if _NUMBERED_LINE.match(x)) >= 0.9 * len(non_empty):
        content = "\n".join(_NUMBERED_LINE.sub("", x, count=1) for x in lines)
    return content


class _History:
    """The tool calls made so far, and their results, indexed by call id."""

    def __init__(self, conv: Conversation) -> None:
        self.calls: list[SimToolCall] = []
        self.results: dict[str, tuple[str, bool]] = {}
        for msg in conv.messages:
            if msg.role == "assistant":
                self.calls.extend(msg.tool_calls)
            elif msg.result is not None:
                self.results[msg.result.call_id] = (msg.result.content, msg.result.is_error)

    def called(self, name: str) -> bool:
        return any(c.name == name for c in self.calls)

    def submitted_items(self) -> int:
        total = 0
        for call in self.calls:
            items = call.arguments.get("items") if call.name == "submit_result" else None
            if isinstance(items, list):
                total += len(items)
        return total


def _finish(tools: frozenset[str], summary: str) -> Reply:
    if "finish" in tools:
        return Reply(None, (("finish", {"summary": summary}),))
    return Reply(summary)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _directory(
    files: tuple[str, ...], history: _History, tools: frozenset[str], parallel: bool, *, edits: bool = False
) -> Reply:
    if "read_file" not in tools:
        return _finish(tools, "No read_file tool was offered, so the files could not be reviewed.")
    read_calls = [c for c in history.calls if c.name == "read_file"]
    requested = {str(c.arguments.get("path", "")) for c in read_calls}
    pending = [p for p in files if p not in requested]
    if pending and not history.called("submit_result"):
        cap = MAX_READS_PER_TURN if parallel else 1
        return Reply(None, tuple(("read_file", {"path": p}) for p in pending[:cap]))
    contents: dict[str, str] = {}
    for call in read_calls:
        path = str(call.arguments.get("path", ""))
        result = history.results.get(call.id)
        if result is None or result[1] or path in contents:
            continue  # no result or an error result (e.g. outside the partition): skip the file
        contents[path] = _normalise_file_text(result[0])
    for path, text in contents.items():
        loop = _LOOP.search(text)
        reads = sum(1 for c in read_calls if str(c.arguments.get("path", "")) == path)
        if loop is not None and reads < int(loop.group(1)) and not history.called("submit_result"):
            return Reply(None, (("read_file", {"path": path}),))
    order = [p for p in files if p in contents] + [p for p in contents if p not in files]
    findings: list[Finding] = []
    for path in order:
        findings.extend(detect(path, contents[path]))
    done = history.submitted_items()
    if done < len(findings) and "submit_result" in tools:
        chunk = findings[done : done + MAX_ITEMS_PER_SUBMIT]
        return Reply(None, (("submit_result", {"items": [f.to_item() for f in chunk]}),))
    fixes = _fixes(order, contents, findings) if edits and "edit_file" in tools else []
    made = [c for c in history.calls if c.name == "edit_file"]
    if len(made) < len(fixes):
        cap = MAX_READS_PER_TURN if parallel else 1
        todo = fixes[len(made) : len(made) + cap]
        return Reply(None, tuple(("edit_file", {"path": e.path, "old": e.old, "new": e.new}) for e in todo))
    if done:
        summary = f"Reviewed {_plural(len(files), 'file')} and reported {_plural(done, 'finding')}."
    else:
        summary = f"Reviewed {_plural(len(contents), 'file')} and found nothing to report."
    if fixes:
        applied = sum(1 for c in made if c.id in history.results and not history.results[c.id][1])
        summary += f" Made {applied} of {_plural(len(fixes), 'edit')} fixing them."
    unreadable = len(files) - sum(1 for p in files if p in contents)
    if unreadable:
        summary += f" {_plural(unreadable, 'file')} could not be read."
    return _finish(tools, summary)


def _fixes(order: list[str], contents: dict[str, str], findings: list[Finding]) -> list[Edit]:
    """The edits fixing ``findings``, file by file in ``order``."""
    return [e for path in order for e in plan_edits(path, contents[path], [f for f in findings if f.path == path])]


def _items(items: tuple[str, ...], history: _History, tools: frozenset[str]) -> Reply:
    done = history.submitted_items()
    if done < len(items) and "submit_result" in tools:
        chunk = items[done : done + LIST_CHUNK]
        return Reply(None, (("submit_result", {"items": [note_for_item(i) for i in chunk]}),))
    return _finish(tools, f"Processed {_plural(len(items), 'item')} and submitted {_plural(done, 'result')}.")


def _paged(total: int, entries: tuple[str, ...], history: _History, tools: frozenset[str]) -> Reply:
    if "read_file" not in tools:
        return _finish(tools, "No read_file tool was offered, so no page could be read.")
    asked = [c.arguments.get("page") for c in history.calls if c.name == "read_file"]
    last = max((p for p in asked if isinstance(p, int)), default=0)
    submitted = history.called("submit_result")
    if last < total and not submitted:
        path = entries[last % len(entries)] if entries else "README.md"
        return Reply(None, (("read_file", {"path": path, "page": last + 1}),))
    if not submitted and "submit_result" in tools:
        item = {"title": f"Read {_plural(total, 'page')}", "body": f"Read {_plural(total, 'page')} one at a time."}
        return Reply(None, (("submit_result", {"items": [item]}),))
    return _finish(tools, f"Read {_plural(total, 'page')}.")


def decide(conv: Conversation, *, refute_pct: float = 10.0, unsure_pct: float = 5.0, edits: bool = False) -> Reply:
    """The next assistant turn for this conversation (``edits``: also fix what has a mechanical fix)."""
    coding = coding_reply(conv, edits=edits)
    if coding is not None:  # a coding CLI's own tools and prompts (sim_coding)
        return Reply(coding.text, coding.calls)
    tools = frozenset(conv.tools)
    if not tools:
        users = conv.user_texts()
        if conv.system.startswith(COMPACT_PREFIX) and users:
            return Reply(compaction_summary(users[-1]))
        return Reply(plain_answer(users[-1] if users else conv.system))
    history = _History(conv)
    if "submit_plan" in tools:
        if history.called("submit_plan"):
            return Reply("Plan submitted.")
        return Reply(None, (("submit_plan", plan_for_goal(conv.system, conv.first_user_text())),))
    if "submit_verdict" in tools:
        if history.called("submit_verdict"):
            return _finish(tools, "Verdict submitted.")
        judged = "\n".join(conv.user_texts())
        return Reply(None, (("submit_verdict", verdict_for(judged, refute_pct=refute_pct, unsure_pct=unsure_pct)),))
    if history.called("finish"):
        return Reply("The session is finished.")
    partition = parse_partition(conv.first_user_text())
    pages = _PAGES.search(conv.first_user_text())
    if pages is not None:
        return _paged(int(pages.group(1)), partition.entries, history, tools)
    if partition.kind == "files":
        return _directory(partition.entries, history, tools, conv.parallel_tool_calls, edits=edits)
    if partition.kind == "items":
        return _items(partition.entries, history, tools)
    return _finish(tools, "The task message names no partition, so there is nothing to do.")
