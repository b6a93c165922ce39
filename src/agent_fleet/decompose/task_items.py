"""Items written in the task itself, found without a model call: URLs, a numbered or bulleted list, or
file paths. With no input, ``decompose`` splits them like the lines of a list file, so
``--task "Summarise these pages: URL1 … URL12"`` runs one session per URL (up to ``--agents``), each
URL in exactly one, and each session's task is the instruction without the other sessions' items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TaskItems", "items_in_task"]

_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_URL_TRAIL = ".,;:!?)]}"
_SEPARATOR = re.compile(r"(?:[\s,;]|…|\.{2,}|\band\b|\bor\b|&)*", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*(?:\d{1,4}|[a-z])[.)]\s+(\S.*?)\s*$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[-*•]\s+(\S.*?)\s*$")
_EXT = (
    r"(?:py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|c|h|cc|cpp|hpp|cs|rb|php|swift|scala|sh|sql"
    r"|md|rst|txt|json|ya?ml|toml|ini|cfg|csv|html|css)"
)
_PATH = re.compile(
    rf"(?<![\w/.:@-])(?:\.{{1,2}}/|/)?(?:[\w.-]+/)+[\w.-]+/?(?![\w/])|(?<![\w/.:@-])[\w-]+(?:\.[\w-]+)*\.{_EXT}\b"
)


@dataclass(frozen=True, slots=True)
class TaskItems:
    instruction: str  # the task without the items
    items: tuple[str, ...]  # in the order written, each once
    what: str  # "URLs", "numbered list items", "list items" or "paths"


def _unique(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def _spans(task: str, pattern: re.Pattern[str], what: str) -> TaskItems | None:
    """Items matched by ``pattern``; the instruction is the task without them and the separators
    (commas, "and", "…") between them."""
    spans = []
    for m in pattern.finditer(task):
        text = m.group(0).rstrip(_URL_TRAIL)
        spans.append((m.start(), m.start() + len(text), text))
    items = _unique([t for _, _, t in spans])
    if len(items) < 2:
        return None
    kept, pos = [], 0
    for start, end, _ in spans:
        between = task[pos:start]
        if pos == 0 or _SEPARATOR.fullmatch(between) is None:  # words between two items stay
            kept.append(between)
        pos = end
    kept.append("" if _SEPARATOR.fullmatch(task[pos:]) else task[pos:])
    instruction = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(" ".join(kept).split()))
    return TaskItems(instruction, items, what)


def _listed(task: str) -> TaskItems | None:
    lines = task.splitlines()
    for pattern, what in ((_NUMBERED, "numbered list items"), (_BULLET, "list items")):
        found = [(i, m.group(1)) for i, line in enumerate(lines) if (m := pattern.match(line))]
        items = _unique([text for _, text in found])
        if len(items) >= 2:
            listed = {i for i, _ in found}
            rest = " ".join(" ".join(line for i, line in enumerate(lines) if i not in listed).split())
            return TaskItems(rest, items, what)
    return None


def items_in_task(task: str) -> TaskItems | None:
    """The items the task spells out (two or more), or None when it names none to split."""
    return _spans(task, _URL, "URLs") or _listed(task) or _spans(task, _PATH, "paths")
