"""A CLI agent's free-text answer split into its findings: one result item per finding.

Coding CLIs answer in markdown. :func:`split_findings` reads the shapes they use:

* a list — bullets (``-``, ``*``, ``+``) or numbered lines (``1.``, ``1)``) — one finding per top-level
  entry, its indented lines and nested entries with it (aider's and Codex's usual answer);
* headings — ``### 1. Title`` or ``## Title`` — one finding per heading with the paragraphs under it
  (Claude Code's usual review), when there are two headings or more;
* plain lines, one finding per line, when every such line names a place (``path:line``).

Text before the first finding and after the last one (``Here is what I found:``, ``Reviewed 3
files.``) is no finding. A finding's title is its bold lead (``**Title**``), else its words up to the
first ``:``, `` — `` or sentence end; its body is the whole entry without the list marker; its location
the first place it names: a backticked or bare ``path:line``, ``path line N``, a ``path#L12`` anchor, a
file path, or a URL. An answer with no such finding (or one that names no place) is one result, as
before.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["split_findings"]

_BULLET = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|\d{1,3}[.)])[ \t]+(?P<text>\S.*)$")
_HEADING = re.compile(r"^(?P<level>#{2,4})[ \t]+(?:\d{1,3}[.)][ \t]*)?(?P<text>\S.*?)[ \t#]*$")
_BOLD_LEAD = re.compile(r"^\*\*(?P<title>[^*\n]{2,200}?)\*\*[ \t]*[:.\-—–]?[ \t]*")
_TITLE_END = re.compile(r"[:]\s|\s[—–-]\s|(?<=[a-z0-9)`])\.\s")
_NAME = r"[\w.-]*\w\.[A-Za-z][\w]{0,7}"  # a file name with its extension
_FILE = rf"(?:[\w.-]+/)*{_NAME}"
_PLACES = (
    re.compile(rf"`(?P<path>{_FILE}|https?://[^`\s]+)(?::(?P<line>\d+)(?:[-:]\d+)?|#L(?P<anchor>\d+))?`"),
    re.compile(rf"(?<![\w/.])(?P<path>{_FILE})(?::(?P<line>\d+)(?:[-:]\d+)?|#L(?P<anchor>\d+))"),
    re.compile(rf"(?<![\w/.])(?P<path>{_FILE}),?\s+\(?lines?\s+(?P<line>\d+)"),
    re.compile(r"(?P<path>https?://[^\s)>\]`'\"]+[^\s)>\]`'\".,;:])"),
    re.compile(rf"(?<![\w/.`])(?P<path>(?:[\w.-]+/)+{_NAME})(?![\w/])"),  # a path with a directory
)
_TITLE_CHARS = 120
_MAX_FINDINGS = 500


def _location(text: str) -> str | None:
    for pattern in _PLACES:
        m = pattern.search(text)
        if m is None:
            continue
        path = m.group("path")
        line = m.groupdict().get("line") or m.groupdict().get("anchor")
        return f"{path}:{line}" if line else path
    return None


def _title(text: str) -> tuple[str, str]:
    """(title, the rest) of a finding's first line."""
    m = _BOLD_LEAD.match(text)
    if m is not None:
        return m.group("title").strip(), text[m.end() :]
    cut = _TITLE_END.search(text)
    head = text[: cut.start() + 1].rstrip(".:") if cut is not None else text
    return head.strip().strip("*_").strip(), text


def _item(lines: list[str], *, heading: bool = False) -> dict[str, Any] | None:
    """A finding from its lines; the first is its heading's text (the title whole) or its list entry's."""
    body = "\n".join(x.rstrip() for x in lines).strip()
    if not body:
        return None
    title = lines[0].strip().strip("*_").strip() if heading else _title(lines[0].strip())[0]
    title = title or body.splitlines()[0]
    item: dict[str, Any] = {"title": title[:_TITLE_CHARS], "body": body}
    where = _location(body)
    if where is not None:
        item["location"] = where
    return item


def _fenced(lines: list[str]) -> set[int]:
    """The lines inside fenced code blocks (and the fences): code, never a list marker or a heading."""
    inside, out = False, set()
    for i, x in enumerate(lines):
        fence = x.lstrip().startswith(("```", "~~~"))
        if inside or fence:
            out.add(i)
        if fence:
            inside = not inside
    return out


def _by_list(lines: list[str]) -> list[list[str]]:
    """Top-level list entries (the least indented markers), each with what follows until the next."""
    code = _fenced(lines)
    marks = [
        (i, len(m.group("indent").expandtabs(4)))
        for i, x in enumerate(lines)
        if i not in code and (m := _BULLET.match(x))
    ]
    if not marks:
        return []
    top = min(indent for _, indent in marks)
    starts = [i for i, indent in marks if indent == top]
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        entry = [_BULLET.sub(r"\g<text>", lines[start], count=1)]
        for i in range(start + 1, end):
            x = lines[i]
            closing = i not in code and not x[:1].isspace() and not _BULLET.match(x)
            if x.strip() and closing and entry[-1].strip() == "":
                break  # an unindented paragraph after a blank line: the answer's closing words
            entry.append(x.strip() if x.strip() else "")
        out.append(entry)
    return out


def _by_heading(lines: list[str]) -> list[list[str]]:
    code = _fenced(lines)
    heads = [(i, len(m.group("level"))) for i, x in enumerate(lines) if i not in code and (m := _HEADING.match(x))]
    # the findings are the headings of the level used most (a "## Review" above them is a title)
    levels = [level for _, level in heads]
    level = max(set(levels), key=lambda v: (levels.count(v), v), default=0)
    starts = [i for i, v in heads if v == level]
    if len(starts) < 2:
        return []
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        head = _HEADING.match(lines[start])
        assert head is not None
        out.append([head.group("text"), *(x.strip() for x in lines[start + 1 : end])])
    return out


def _by_line(lines: list[str]) -> list[list[str]]:
    found = [[x.strip()] for x in lines if x.strip()]
    if len(found) < 2 or any(_location(f[0]) is None or ":" not in (_location(f[0]) or "") for f in found):
        return []
    return found


def split_findings(text: str | None) -> list[dict[str, Any]]:
    """The findings in a free-text answer (module docstring); empty when it lists none."""
    if not text or not text.strip():
        return []
    lines = text.replace("\r\n", "\n").splitlines()
    sections = _by_heading(lines)
    # A heading per finding may list its details (- **Impact:** …); a heading per section (## Security)
    # lists findings, each at its own place: then the list entries are the findings.
    by_heading = bool(sections) and not any(_located_entries(section[1:]) >= 2 for section in sections)
    entries = sections if by_heading else (_by_list(lines) or sections or _by_line(lines))
    heading = entries is sections
    items = [it for e in entries[:_MAX_FINDINGS] if (it := _item(e, heading=heading)) is not None]
    if len(items) == 1 and "location" not in items[0]:
        return []  # one entry naming no place: the answer as a whole is the result
    return items


def _located_entries(lines: list[str]) -> int:
    """How many top-level list entries of ``lines`` name a place of their own."""
    return sum(1 for entry in _by_list(lines) if _location(entry[0]) is not None)
