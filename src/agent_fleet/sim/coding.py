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
it read and reports: one ``ReportFindings`` call where that tool is offered, else a final text — one
JSON result item per line when the task asks for JSON (SPEC.md "CLI agents": JSON items in a final text
are results), else markdown in the CLI's usual shape: a numbered list for aider, bullets for Codex,
a heading per finding for Claude Code.

With ``edits`` it also fixes what has a mechanical fix (:mod:`~agent_fleet.sim.fixes`), with
each CLI's own edit tool, before it reports:

* **Claude Code**: one ``Edit`` call per fix (``file_path`` absolute, ``old_string``, ``new_string``),
  all in one turn (Claude Code runs them one after the other);
* **Codex CLI**: one shell call running ``apply_patch`` with a patch in Codex's own format
  (``*** Begin Patch`` / ``*** Update File: PATH`` / ``@@`` hunks of ``-`` and ``+`` lines / ``*** End
  Patch``), given as a heredoc to ``exec_command`` (or as ``["apply_patch", PATCH]`` to ``shell``):
  Codex intercepts it and applies the patch itself;
* **aider**: its SEARCH/REPLACE blocks (the file's path, a fence, ``<<<<<<< SEARCH``, ``=======``,
  ``>>>>>>> REPLACE``) after the findings in its one answer.

Pure: the same conversation always gets the same reply.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from agent_fleet.sim.conversation import Conversation, SimToolCall
from agent_fleet.sim.detectors import Finding, detect
from agent_fleet.sim.fixes import Edit, plan_edits

__all__ = ["AIDER_FENCE", "CodingReply", "aider_blocks", "codex_patch", "coding_reply", "strip_reminders"]

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

    def edits(self, edits: list[Edit]) -> tuple[tuple[str, dict[str, object]], ...]:
        """The calls making ``edits`` with this CLI's own edit tool (none when it has none)."""
        if not edits:
            return ()
        if self.name == "Read":
            return tuple(
                ("Edit", {"file_path": self.args(e.path)["file_path"], "old_string": e.old, "new_string": e.new})
                for e in edits
            )
        patch = codex_patch(edits)
        if self.name == "exec_command":
            return (("exec_command", {"cmd": f"apply_patch <<'EOF'\n{patch}\nEOF"}),)
        if self.name == "shell":
            return (("shell", {"command": ["apply_patch", patch]}),)
        return ()

    def is_edit(self, call: SimToolCall) -> bool:
        if call.name == "Edit":
            return True
        if call.name == "exec_command":
            return str(call.arguments.get("cmd", "")).startswith("apply_patch")
        command = call.arguments.get("command")
        return call.name == "shell" and isinstance(command, list) and command[:1] == ["apply_patch"]

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


def codex_patch(edits: list[Edit]) -> str:
    """``edits`` as one patch in Codex's ``apply_patch`` format: a file's hunks in file order."""
    out = ["*** Begin Patch"]
    for path in dict.fromkeys(e.path for e in edits):
        out.append(f"*** Update File: {path}")
        for e in sorted((e for e in edits if e.path == path), key=lambda e: e.line):
            out.append("@@")
            out += ["-" + line for line in e.old.splitlines()]
            out += ["+" + line for line in e.new.splitlines()]
    out.append("*** End Patch")
    return "\n".join(out)


def aider_blocks(edits: list[Edit]) -> str:
    """``edits`` as aider's SEARCH/REPLACE blocks (its ``diff`` edit format)."""
    blocks = []
    for e in edits:
        old, new = e.old if e.old.endswith("\n") else e.old + "\n", e.new if e.new.endswith("\n") else e.new + "\n"
        blocks.append(f"{e.path}\n```python\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```")
    return "\n\n".join(blocks)


def _fixes(files: dict[str, str]) -> list[Edit]:
    return [e for path, text in files.items() for e in plan_edits(path, text, detect(path, text))]


def _markdown(summary: str, findings: list[Finding], style: str) -> str:
    """The findings as a model writes them for a person: ``numbered``, ``bullets`` or ``headings``."""
    out = [summary, ""]
    for n, f in enumerate(findings, 1):
        if style == "headings":
            out += [f"### {n}. {f.title}", f"**Location:** `{f.location}`", "", f.body, ""]
        elif style == "bullets":
            out.append(f"- **{f.title}** (`{f.location}`): {f.body}")
        else:
            out += [f"{n}. **{f.title}** — `{f.location}`", f"   {f.body}"]
    return "\n".join(out).rstrip()


def _report(conv: Conversation, findings: list[Finding], files: int, task: str, style: str) -> CodingReply:
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
    if "json" in task.lower() or not findings:
        lines = [json.dumps(f.to_item(), ensure_ascii=False) for f in findings]
        return CodingReply("\n".join([summary, *lines]))
    return CodingReply(_markdown(summary, findings, style))


def _with_tools(conv: Conversation, tool: _Tool, task: str, *, edits: bool) -> CodingReply:
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
    if edits and not any(tool.is_edit(c) for c in calls):
        fix = tool.edits(_fixes({p: read[p] for p in files if p in read}))
        if fix:
            return CodingReply(None, fix)
    return _report(conv, findings, len(files), task, "headings" if tool.name == "Read" else "bullets")


def _inline(conv: Conversation, *, edits: bool) -> CodingReply:
    """aider: the files are in the messages; review them (and fix what it can) in one answer."""
    seen: dict[str, str] = {}
    for text in conv.user_texts():
        for m in AIDER_FENCE.finditer(text):
            seen.setdefault(m.group("path").strip(), m.group("body"))
    findings = [f for path, body in seen.items() for f in detect(path, body)]
    report = _report(conv, findings, len(seen), _task_text(conv), "numbered")
    fixes = _fixes(seen) if edits else []
    if not fixes:
        return report
    return CodingReply(f"{report.text}\n\n{aider_blocks(fixes)}\n", report.calls)


def _task_text(conv: Conversation) -> str:
    """The first user turn that is the user's own words (not a CLI's context turn)."""
    for text in conv.user_texts():
        own = strip_reminders(text)
        if own.strip() and not _CONTEXT_TURN.match(own):
            return own
    return ""


def coding_reply(conv: Conversation, *, edits: bool = False) -> CodingReply | None:
    """The reply when ``conv`` comes from a coding CLI, else None (the built-in protocol applies);
    with ``edits`` it also fixes what has a mechanical fix, with the CLI's own edit tool."""
    task = _task_text(conv)
    tool = _Tool(conv)
    if tool.name in ("Read", "exec_command", "shell"):
        return _with_tools(conv, tool, task, edits=edits)
    if not conv.tools and AIDER_FENCE.search("\n".join(conv.user_texts())):
        return _inline(conv, edits=edits)
    return None
