"""The simulated agent behind coding CLIs: Claude Code, Codex CLI and aider, as they really call a model.

Each of these drives the model with its own tools and prompts, not the built-in agent's protocol:

* **Claude Code** offers ``Read`` (``file_path``, absolute) and ``ReportFindings`` (``findings: [{file,
  line, summary, short_summary, failure_scenario, category}]``) and states its working directory in a
  system turn ("Primary working directory: …");
* **Codex CLI** offers a shell tool (``exec_command`` with ``cmd``, or ``shell`` with ``command``) and
  sends its environment (``<environment_context>`` with ``<cwd>``) as a user turn before the task;
* **aider** offers no tools: the files added to the chat are in its messages, each as its path followed
  by a fenced block.

The simulated model reads the partition named in the first user message (``Files:`` / ``- path`` lines,
or a ``.txt`` file that lists them, which it reads first), runs the deterministic detectors over what
it read and reports: one ``ReportFindings`` call where that tool is offered, else a final text with one
JSON result item per line (SPEC.md "CLI agents": JSON items in a final text are results). Pure: the
same conversation always gets the same reply.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from agent_fleet.testing.sim_conversation import Conversation, SimToolCall
from agent_fleet.testing.sim_detectors import Finding, detect

__all__ = ["AIDER_FENCE", "CodingReply", "coding_reply", "strip_reminders"]

AIDER_FENCE = re.compile(r"^(?P<path>[\w][\w./-]*\.\w+)\n```[^\n]*\n(?P<body>.*?)\n?```$", re.M | re.S)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.S)
# Codex CLI sends its environment (and any AGENTS.md) as user turns of their own before the task.
_CONTEXT_TURN = re.compile(r"^\s*(?:<environment_context>|<user_instructions>|# AGENTS\.md instructions)")
_WORKDIR = re.compile(r"(?:Primary working directory|Working directory|cwd):\s*(\S+)|<cwd>([^<\s]+)</cwd>")
_LISTING = re.compile(r"(/[^\s'\"]+\.txt)\b")
_GUTTER = re.compile(r"^\s*\d+(?:→|\t|: |\| ?)", re.M)
_READS_PER_TURN = 25


@dataclass(frozen=True, slots=True)
class CodingReply:
    text: str | None
    calls: tuple[tuple[str, dict[str, object]], ...] = ()


def strip_reminders(text: str) -> str:
    """The user's own words: Claude Code prepends ``<system-reminder>`` blocks to a message."""
    return _REMINDER.sub("", text)


def _paths_in(text: str) -> list[str]:
    out: list[str] = []
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("- ") and s[2:].strip():
            out.append(s[2:].strip())
    return out


def _listed(text: str) -> list[str]:
    """Entries of a partition listing file: one per line, ``- `` optional."""
    out = []
    for raw in _GUTTER.sub("", text).splitlines():
        s = raw.strip()
        out.append(s[2:].strip() if s.startswith("- ") else s)
    return [s for s in out if s]


class _Tool:
    """How this CLI reads a file: the tool's name and the arguments for one path."""

    def __init__(self, conv: Conversation) -> None:
        tools = set(conv.tools)
        self.name = next((t for t in ("Read", "exec_command", "shell", "read_file") if t in tools), "")
        match = _WORKDIR.search("\n".join([conv.context_text(), *conv.user_texts()[:2]]))
        self.workdir = (match.group(1) or match.group(2)).rstrip("/") if match else ""

    def args(self, path: str) -> dict[str, object]:
        full = path if path.startswith("/") or not self.workdir else f"{self.workdir}/{path}"
        if self.name == "Read":
            return {"file_path": full}
        if self.name == "exec_command":
            return {"cmd": f"cat {shlex.quote(path)}"}
        if self.name == "shell":
            return {"command": ["cat", path]}
        return {"path": path}

    def path_of(self, call: SimToolCall) -> str | None:
        if call.name != self.name:
            return None
        a = call.arguments
        if self.name == "Read":
            path = str(a.get("file_path", ""))
            prefix = self.workdir + "/"
            return path[len(prefix) :] if self.workdir and path.startswith(prefix) else path
        if self.name == "exec_command":
            words = shlex.split(str(a.get("cmd", "")))
            return words[1] if len(words) == 2 and words[0] == "cat" else None
        if self.name == "shell":
            cmd = a.get("command")
            return str(cmd[1]) if isinstance(cmd, list) and len(cmd) == 2 and cmd[0] == "cat" else None
        return str(a.get("path", ""))


def _results(conv: Conversation) -> tuple[list[SimToolCall], dict[str, str]]:
    calls: list[SimToolCall] = []
    results: dict[str, str] = {}
    for msg in conv.messages:
        if msg.role == "assistant":
            calls.extend(msg.tool_calls)
        elif msg.result is not None and not msg.result.is_error:
            results[msg.result.call_id] = msg.result.content
    return calls, results


def _file_text(content: str) -> str:
    """A tool's file output without a line-number gutter (Claude Code's Read numbers its lines)."""
    lines = content.splitlines()
    numbered = [x for x in lines if x.strip()]
    if numbered and sum(1 for x in numbered if _GUTTER.match(x)) >= 0.9 * len(numbered):
        return "\n".join(_GUTTER.sub("", x, count=1) for x in lines)
    for marker in ("Output:\n", "output:\n"):  # codex wraps a command's output
        if marker in content:
            return content.split(marker, 1)[1]
    return content


def _report(conv: Conversation, findings: list[Finding], files: int) -> CodingReply:
    summary = f"Reviewed {files} file(s) and reported {len(findings)} finding(s)."
    if "ReportFindings" in conv.tools:
        items = [
            {
                "file": f.path,
                "line": f.line,
                "summary": f.body,
                "short_summary": f.title[:60],
                "failure_scenario": f.body,
                "category": f.category,
            }
            for f in findings
        ]
        return CodingReply(None, (("ReportFindings", {"level": "medium", "findings": items}),))
    lines = [json.dumps(f.to_item(), ensure_ascii=False) for f in findings]
    return CodingReply("\n".join([summary, *lines]))


def _with_tools(conv: Conversation, tool: _Tool, task: str) -> CodingReply:
    calls, results = _results(conv)
    if any(c.name == "ReportFindings" for c in calls):
        n = sum(len(c.arguments.get("findings") or []) for c in calls if c.name == "ReportFindings")  # type: ignore[arg-type]
        return CodingReply(f"Reported {n} finding(s).")
    read: dict[str, str] = {}
    asked: set[str] = set()
    for call in calls:
        path = tool.path_of(call)
        if path is None:
            continue
        asked.add(path)
        if call.id in results:
            read.setdefault(path, _file_text(results[call.id]))
    files = _paths_in(task)
    listing = _LISTING.search(task) if not files else None
    if listing is not None:
        where = listing.group(1)
        if where not in asked:
            return CodingReply(None, ((tool.name, tool.args(where)),))
        files = _listed(read.get(where, ""))
    pending = [p for p in files if p not in asked]
    if pending:
        return CodingReply(None, tuple((tool.name, tool.args(p)) for p in pending[:_READS_PER_TURN]))
    findings = [f for p in files if p in read for f in detect(p, read[p])]
    return _report(conv, findings, len(files))


def _inline(conv: Conversation) -> CodingReply:
    """aider: the files are in the messages; review them in one answer."""
    seen: dict[str, str] = {}
    for text in conv.user_texts():
        for m in AIDER_FENCE.finditer(text):
            seen.setdefault(m.group("path").strip(), m.group("body"))
    findings = [f for path, body in seen.items() for f in detect(path, body)]
    return _report(conv, findings, len(seen))


def _task_text(conv: Conversation) -> str:
    """The first user turn that is the user's own words (not a CLI's context turn)."""
    for text in conv.user_texts():
        own = strip_reminders(text)
        if own.strip() and not _CONTEXT_TURN.match(own):
            return own
    return ""


def coding_reply(conv: Conversation) -> CodingReply | None:
    """The reply when ``conv`` comes from a coding CLI, else None (the built-in protocol applies)."""
    task = _task_text(conv)
    tool = _Tool(conv)
    if tool.name in ("Read", "exec_command", "shell"):
        return _with_tools(conv, tool, task)
    if not conv.tools and AIDER_FENCE.search("\n".join(conv.user_texts())):
        return _inline(conv)
    return None
