"""Reading what external CLI agents produce: result items, token usage, cost, errors, their own session id.

Formats (``--agent-format``); each reads the tool's output where the tool puts it — stdout and the
files the tool itself writes in its home (the session's workspace), listed by :func:`own_files`:

* ``jsonl`` (default): each stdout line that is a JSON object with ``title`` and ``body`` is a
  result item ``{title, body, category?, confidence?, location?}``; other lines are ignored.
* ``claude``: ``claude -p --output-format json`` prints one result object: ``result`` (final text),
  ``is_error``/``subtype``, ``session_id``, ``usage`` (``input_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens``), ``total_cost_usd`` and ``modelUsage``. Its
  transcript (``~/.claude/projects/<dir>/<session id>.jsonl``) holds the ``ReportFindings`` tool
  calls: each finding there (``file``, ``line``, ``summary``, ``short_summary``, ``category``) is one
  result. ``is_error`` (an API or authentication error, even with exit code 0) fails the attempt.
* ``codex``: ``codex exec --json`` prints JSON events, one per line: ``thread.started`` (its
  ``thread_id`` is the session id), ``item.completed`` carrying an ``agent_message`` item (its
  ``text``), ``turn.completed`` carrying ``usage`` (``input_tokens``, ``cached_input_tokens``,
  ``output_tokens``), ``turn.failed`` / ``error`` on failure.
* ``aider``: the analytics log (``--analytics-log``; ``message_send`` events carry ``prompt_tokens``,
  ``completion_tokens``, ``cost`` and the running ``total_cost``) for usage and cost; the chat history
  (``.aider.chat.history.md``) for the model's replies, the edits it applied and the errors it met
  (stdout when there is no history). Each edit aider applied (``Applied edit to PATH``) is a result
  located at the first line it changed; an API or authentication error that ended the last request
  fails the attempt, although aider exits 0.

For the formats with a final text (claude, codex, aider's replies), JSON result items inside that text
are used when present; else the findings it lists (a markdown list, one heading per finding, or one
finding per line: :func:`~agent_fleet.hands.cli_text.split_findings`), each with the place it names;
otherwise the whole text counts as one result, as for the built-in agent.
Usage follows :class:`~agent_fleet.domain.usage.Usage`: ``input_tokens`` includes cached tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from agent_fleet.domain.usage import Usage
from agent_fleet.errors import UsageError
from agent_fleet.hands.cli_text import split_findings

__all__ = [
    "FORMATS",
    "CliReport",
    "authentication_failed",
    "edited_paths",
    "items_from_text",
    "own_files",
    "parse_output",
]

FORMATS = ("jsonl", "claude", "codex", "aider")
_ITEM_KEYS = ("title", "body", "category", "confidence", "location")
_ERROR_CHARS = 300

AIDER_HISTORY = ".aider.chat.history.md"
# Files (globs relative to the CLI's home, which is the session's workspace) each tool writes itself.
_OWN_FILES: dict[str, tuple[str, ...]] = {
    "jsonl": (),
    "claude": (".claude/projects/*/*.jsonl",),
    "codex": (".codex/sessions/**/*.jsonl",),
    "aider": (AIDER_HISTORY,),
}


# How the tools word a refused credential: Claude Code "Failed to authenticate. API Error: 401 …", Codex
# "unexpected status 401 Unauthorized: …", aider "The API provider is not able to authenticate you".
_AUTH_ERROR = re.compile(r"\b401\b|\bunauthori[sz]ed\b|authenticat|invalid (?:x-)?api[ _-]?key", re.I)


def authentication_failed(error: str | None) -> bool:
    """Whether an error a tool reported is a refused credential: another attempt cannot fix it."""
    return error is not None and _AUTH_ERROR.search(error) is not None


def own_files(fmt: str) -> tuple[str, ...]:
    """Globs of the files ``fmt``'s tool writes in its home: read for results, kept for a resume."""
    return _OWN_FILES.get(fmt, ())


@dataclass(frozen=True, slots=True)
class CliReport:
    items: tuple[dict[str, Any], ...] = ()
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal | None = None
    model_usage: dict[str, Usage] = field(default_factory=dict)
    final_text: str | None = None
    error: str | None = None  # the CLI itself reported a failure (whatever its exit code)
    cli_session_id: str | None = None  # the CLI's own conversation id, to continue it


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def _money(v: Any) -> Decimal | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return Decimal(str(v))
    except InvalidOperation:
        return None


def _short(text: str) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), text.strip())
    return line[:_ERROR_CHARS]


def _item(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    title, body = obj.get("title"), obj.get("body")
    if not isinstance(title, str) or not title.strip() or not isinstance(body, str):
        return None
    item: dict[str, Any] = {k: v for k, v in obj.items() if k not in _ITEM_KEYS}
    item.update(title=title.strip(), body=body)
    for key in ("category", "location"):
        if isinstance(obj.get(key), str):
            item[key] = obj[key]
    conf = obj.get("confidence")
    if isinstance(conf, int | float) and not isinstance(conf, bool) and 0.0 <= conf <= 1.0:
        item["confidence"] = float(conf)
    return item


def _json_lines(text: str) -> Iterable[Any]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _items_in(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for obj in _json_lines(text):
        for cand in obj if isinstance(obj, list) else [obj]:
            it = _item(cand)
            if it is not None:
                found.append(it)
    if not found:
        try:
            whole = json.loads(text)
        except ValueError:
            return found
        cands = whole.get("items") if isinstance(whole, dict) else whole
        if isinstance(cands, list):
            found = [it for it in (_item(c) for c in cands) if it is not None]
    return found


def items_from_text(text: str | None) -> list[dict[str, Any]]:
    """Result items in a final text: JSON items, else its findings (a markdown list, headings, one
    per line: :mod:`~agent_fleet.hands.cli_text`), else the text itself as one item (empty: none)."""
    if not text or not text.strip():
        return []
    found = _items_in(text) or split_findings(text)
    if found:
        return found
    first = next(line.strip() for line in text.splitlines() if line.strip())
    return [{"title": first[:120], "body": text.strip()}]


def _parse_jsonl(stdout: str) -> CliReport:
    return CliReport(items=tuple(it for it in (_item(o) for o in _json_lines(stdout)) if it is not None))


# -- claude ---------------------------------------------------------------------------------------
def _claude_result(stdout: str) -> dict[str, Any] | None:
    result: dict[str, Any] | None = None
    for obj in _json_lines(stdout):
        if isinstance(obj, dict) and obj.get("type") == "result":
            result = obj
    if result is None:
        try:
            whole = json.loads(stdout)
        except ValueError:
            whole = None
        result = whole if isinstance(whole, dict) else None
    return result


def _finding(raw: Any) -> dict[str, Any] | None:
    """A ``ReportFindings`` finding as a result item."""
    if not isinstance(raw, dict) or not isinstance(raw.get("summary"), str) or not raw["summary"].strip():
        return None
    summary = raw["summary"].strip()
    title = raw.get("short_summary") if isinstance(raw.get("short_summary"), str) else None
    body = summary
    scenario = raw.get("failure_scenario")
    if isinstance(scenario, str) and scenario.strip() and scenario.strip() != summary:
        body = f"{summary}\n\n{scenario.strip()}"
    item: dict[str, Any] = {"title": (title or _short(summary))[:120], "body": body}
    if isinstance(raw.get("category"), str):
        item["category"] = raw["category"]
    if isinstance(raw.get("file"), str) and raw["file"]:
        line = raw.get("line")
        has_line = isinstance(line, int) and not isinstance(line, bool) and line > 0
        item["location"] = f"{raw['file']}:{line}" if has_line else raw["file"]
    for key in ("severity", "verdict", "outcome"):
        if isinstance(raw.get(key), str):
            item[key] = raw[key]
    return item


def _claude_transcript(files: Mapping[str, str], session_id: str | None) -> tuple[str | None, str]:
    """(session id, transcript text): the named session's file, else the only one there is."""
    names = sorted(p for p in files if p.startswith(".claude/projects/") and p.endswith(".jsonl"))
    if session_id is not None:
        names = [p for p in names if p.rsplit("/", 1)[-1] == f"{session_id}.jsonl"]
    if len(names) != 1:
        return session_id, ""
    return names[0].rsplit("/", 1)[-1].removesuffix(".jsonl"), files[names[0]]


def _reported_findings(transcript: str) -> list[dict[str, Any]] | None:
    """Findings of every ``ReportFindings`` call in a transcript; None if it made no such call."""
    found: list[dict[str, Any]] | None = None
    seen: set[str] = set()
    for entry in _json_lines(transcript):
        message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "assistant" else None
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_use" or block.get("name") != "ReportFindings":
                continue
            if str(block.get("id")) in seen:
                continue
            seen.add(str(block.get("id")))
            given = (block.get("input") or {}).get("findings")
            found = found if found is not None else []
            found.extend(it for it in (_finding(f) for f in given or ()) if it is not None)
    return found


def _parse_claude(stdout: str, files: Mapping[str, str]) -> CliReport:
    result = _claude_result(stdout)
    sid = result.get("session_id") if result is not None and isinstance(result.get("session_id"), str) else None
    sid, transcript = _claude_transcript(files, sid)
    if result is None:
        return CliReport(error="no result object on stdout", cli_session_id=sid)
    u = result.get("usage") or {}
    cache_read, cache_write = _int(u.get("cache_read_input_tokens")), _int(u.get("cache_creation_input_tokens"))
    usage = Usage(
        input_tokens=_int(u.get("input_tokens")) + cache_read + cache_write,
        output_tokens=_int(u.get("output_tokens")),
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
    per_model: dict[str, Usage] = {}
    for model, mu in (result.get("modelUsage") or {}).items():
        if isinstance(mu, dict):
            r, w = _int(mu.get("cacheReadInputTokens")), _int(mu.get("cacheCreationInputTokens"))
            per_model[str(model)] = Usage(_int(mu.get("inputTokens")) + r + w, _int(mu.get("outputTokens")), r, w)
    text = result.get("result") if isinstance(result.get("result"), str) else None
    error: str | None = None
    subtype = str(result.get("subtype") or "success")
    if subtype != "success":
        error = subtype
    elif result.get("is_error"):  # e.g. "API Error: 401 ..." after an authentication failure, exit code 0 or not
        error = _short(text) if text and text.strip() else "error"
    reported = _reported_findings(transcript)
    items = reported if reported is not None else items_from_text(text)
    return CliReport(
        items=tuple(items) if error is None else (),
        usage=usage,
        cost_usd=_money(result.get("total_cost_usd")),
        model_usage=per_model,
        final_text=text,
        error=error,
        cli_session_id=sid,
    )


# -- codex ----------------------------------------------------------------------------------------
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _codex_rollout_id(files: Mapping[str, str]) -> str | None:
    """The session id in the name of Codex's only rollout file (``rollout-<time>-<uuid>.jsonl``)."""
    ids = {m.group(0) for p in files if p.startswith(".codex/sessions/") for m in [_UUID.search(p)] if m}
    return ids.pop() if len(ids) == 1 else None


def _parse_codex(stdout: str, files: Mapping[str, str]) -> CliReport:
    usage = Usage()
    messages: list[str] = []
    error: str | None = None
    thread: str | None = None
    for ev in _json_lines(stdout):
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type")
        if kind == "thread.started" and isinstance(ev.get("thread_id"), str):
            thread = ev["thread_id"]
        elif kind == "turn.completed":
            u = ev.get("usage") or {}
            usage = usage + Usage(
                input_tokens=_int(u.get("input_tokens")),
                output_tokens=_int(u.get("output_tokens")),
                cached_input_tokens=_int(u.get("cached_input_tokens")),
            )
            error = None  # a turn that completed after an error event recovered from it
        elif kind == "item.completed":
            item = ev.get("item") or {}
            itype = item.get("type") or item.get("item_type")
            if itype in ("agent_message", "assistant_message") and isinstance(item.get("text"), str):
                messages.append(item["text"])
        elif kind in ("turn.failed", "error"):
            err = ev.get("error") if kind == "turn.failed" else ev
            msg = err.get("message") if isinstance(err, dict) else None
            error = _short(str(msg or kind))
    final = messages[-1] if messages else None
    items = tuple(items_from_text(final)) if error is None else ()
    sid = thread or _codex_rollout_id(files)
    return CliReport(items=items, usage=usage, final_text=final, error=error, cli_session_id=sid)


# -- aider ----------------------------------------------------------------------------------------
_AIDER_ERROR = re.compile(
    r"^(?:> )?(?:litellm\.\w*(?:Error|Exception)\b.*|The API provider is not able to authenticate you.*)$", re.M
)
_AIDER_TOKENS = re.compile(r"^(?:> )?Tokens: .* sent", re.M)
_AIDER_APPLIED = re.compile(r"^(?:> )?Applied edit to (?P<path>.+?)\s*$", re.M)
_EDIT_BLOCK = re.compile(
    r"^(?P<path>[^\n`]+)\n(?:```[^\n]*\n)?<{5,9} SEARCH\n(?P<search>.*?)^={5,9}\n(?P<replace>.*?)^>{5,9} REPLACE",
    re.M | re.S,
)


def _aider_replies(history: str) -> list[str]:
    """The model's replies in a chat history: what is neither a user line (``#### ``), a tool line
    (``> ``) nor a session header."""
    replies: list[str] = []
    current: list[str] = []
    for line in history.splitlines():
        if line.startswith(("#### ", "> ", "# aider chat started at")) or line == ">":
            if any(x.strip() for x in current):
                replies.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    if any(x.strip() for x in current):
        replies.append("\n".join(current).strip())
    return replies


def _edit_items(log: str, replies: list[str], files: Mapping[str, str]) -> list[dict[str, Any]]:
    """One result per file aider reports it edited, located at the first line its edit changed."""
    blocks: dict[str, tuple[str, str]] = {}
    for reply in replies:
        for m in _EDIT_BLOCK.finditer(reply):
            blocks[m.group("path").strip().strip("`*")] = (m.group("search"), m.group("replace"))
    items: list[dict[str, Any]] = []
    for path in dict.fromkeys(m.group("path") for m in _AIDER_APPLIED.finditer(log)):
        search, replace = blocks.get(path, ("", ""))
        location = path
        text = files.get(path)
        new_lines = [x for x in replace.splitlines() if x.strip() and x not in search.splitlines()]
        if text is not None and new_lines:
            lines = text.splitlines()
            hit = next((i for i, x in enumerate(lines) if x == new_lines[0]), None)
            location = f"{path}:{hit + 1}" if hit is not None else path
        body = f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE" if path in blocks else f"edited {path}"
        items.append({"title": f"Edited {path}", "body": body, "category": "edit", "location": location})
    return items


def _aider_error(log: str) -> str | None:
    """The API error that ended aider's last request (it exits 0 after one), if any."""
    errors = list(_AIDER_ERROR.finditer(log))
    if not errors:
        return None
    tokens = list(_AIDER_TOKENS.finditer(log))
    if tokens and tokens[-1].start() > errors[-1].start():
        return None  # a later request went through
    return errors[-1].group(0).removeprefix("> ").strip()[:_ERROR_CHARS]


def _parse_aider(stdout: str, analytics: str, files: Mapping[str, str]) -> CliReport:
    usage = Usage()
    total: Decimal | None = None
    summed = Decimal(0)
    for ev in _json_lines(analytics):
        if not isinstance(ev, dict) or ev.get("event") != "message_send":
            continue
        props = ev.get("properties") or {}
        usage = usage + Usage(_int(props.get("prompt_tokens")), _int(props.get("completion_tokens")))
        summed += _money(props.get("cost")) or Decimal(0)
        running = _money(props.get("total_cost"))
        if running is not None:
            total = running if total is None else max(total, running)
    cost = total if total is not None else (summed if summed else None)
    history = files.get(AIDER_HISTORY)
    log = history if history is not None else stdout
    replies = _aider_replies(history) if history is not None else ([stdout.strip()] if stdout.strip() else [])
    error = _aider_error(log)
    found: list[dict[str, Any]] = []
    for reply in replies:
        in_reply = _items_in(reply)
        found.extend(in_reply)
    edits = _edit_items(log, replies, files)
    if not found and replies:  # a review in markdown: one result per finding, beside the edits
        found = split_findings(replies[-1])
    if not found and not edits:
        found = items_from_text(replies[-1] if replies else None)
    unique = list({json.dumps(i, sort_keys=True): i for i in [*found, *edits]}.values())
    return CliReport(
        items=tuple(unique) if error is None else (),
        usage=usage,
        cost_usd=cost,
        final_text=replies[-1] if replies else None,
        error=error,
        cli_session_id=AIDER_HISTORY if history is not None else None,
    )


def edited_paths(fmt: str, stdout: str, files: Mapping[str, str]) -> list[str]:
    """Files the tool says it edited (aider's ``Applied edit to PATH``), relative to its workspace."""
    if fmt != "aider":
        return []
    log = files.get(AIDER_HISTORY, stdout)
    return list(dict.fromkeys(m.group("path") for m in _AIDER_APPLIED.finditer(log)))


def parse_output(
    fmt: str, stdout: str, *, analytics_log: str = "", files: Mapping[str, str] | None = None
) -> CliReport:
    """Read one run of a CLI agent: its stdout, its analytics log (aider) and its own files
    (:func:`own_files`, plus for aider the files it edited), by path relative to its home."""
    own = files or {}
    if fmt == "jsonl":
        return _parse_jsonl(stdout)
    if fmt == "claude":
        return _parse_claude(stdout, own)
    if fmt == "codex":
        return _parse_codex(stdout, own)
    if fmt == "aider":
        return _parse_aider(stdout, analytics_log, own)
    raise UsageError(f"unknown --agent-format {fmt!r} (choose from {', '.join(FORMATS)})")
