"""Run outputs (SPEC.md, "Outputs"): results.jsonl, summary.json, report.md and report.html.

Results are ordered by category (alphabetically, ``other`` and ``uncategorized`` last), then by the
urgency the agent gave (``severity`` or ``priority`` in the result's extra fields; a result without
one ranks as medium), then confidence (highest first, none last), then the number of sessions that
reported it (``corroborated_by``, most first), then location.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.members import corroboration
from agent_fleet.domain.results import ResultItem

__all__ = [
    "Groups",
    "category_rows",
    "group_by_category",
    "sort_results",
    "urgency",
    "urgency_label",
    "write_outputs",
    "write_results_jsonl",
]

_SEVERITY = {
    "critical": 0,
    "blocker": 0,
    "urgent": 0,
    "high": 1,
    "major": 1,
    "error": 1,
    "medium": 2,
    "moderate": 2,
    "normal": 2,
    "warning": 2,
    "low": 3,
    "minor": 3,
    "info": 4,
    "informational": 4,
    "note": 4,
    "trivial": 4,
    "none": 4,
}
_LAST_CATEGORIES = ("other", "uncategorized")
_LINE = json.JSONEncoder(ensure_ascii=False, default=str)  # json.dumps' own, made once for every line
_UNRATED = 2


def urgency(item: ResultItem) -> int:
    """0 (most urgent) … 4 from ``severity`` or ``priority`` (``P0``…``P4``, 0…4, or a severity word)."""
    for key in ("severity", "priority"):
        value = item.extra.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            return max(0, min(4, int(value)))
        text = str(value).strip().lower()
        if text[:1] == "p" and text[1:].isdigit():
            return max(0, min(4, int(text[1:])))
        if text.isdigit():
            return max(0, min(4, int(text)))
        if text in _SEVERITY:
            return _SEVERITY[text]
    return _UNRATED


def urgency_label(item: ResultItem) -> str | None:
    for key in ("severity", "priority"):
        value = item.extra.get(key)
        if value is not None and not isinstance(value, bool):
            return str(value)
    return None


def _category_key(category: str | None) -> tuple[int, str]:
    cat = category or "uncategorized"
    return (1 if cat in _LAST_CATEGORIES else 0, cat)


def sort_results(results: Sequence[ResultItem]) -> list[ResultItem]:
    return sorted(
        results,
        key=lambda r: (
            _category_key(r.category),
            urgency(r),
            -(r.confidence if r.confidence is not None else float("-inf")),
            -corroboration(r),  # of two equally confident results, the one more sessions reported first
            r.location or "",
            r.id,
        ),
    )


Groups = list[tuple[str, list[ResultItem]]]


def group_by_category(results: Sequence[ResultItem]) -> Groups:
    """The results in :func:`sort_results` order, cut where the category changes (the order puts
    each category's results together, so the groups read one after the other are that order)."""
    groups: dict[str, list[ResultItem]] = {}
    for r in sort_results(results):
        groups.setdefault(r.category or "uncategorized", []).append(r)
    return list(groups.items())


def category_rows(groups: Groups) -> list[dict[str, Any]]:
    """Per category of :func:`group_by_category`: raw results (representatives plus their duplicates),
    unique, dedup rate."""
    rows = []
    for cat, items in groups:
        raw = sum(1 + len(r.duplicates) for r in items)
        rows.append({"category": cat, "raw": raw, "unique": len(items), "dedup_rate": 1 - len(items) / raw})
    return rows


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # an agent's own fields may carry a lone surrogate (from a JSON line): U+FFFD
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8")


def _atomic_write(path: Path, text: str) -> None:
    _atomic_write_parts(path, (text,))


def _atomic_write_parts(path: Path, parts: Iterable[str]) -> None:
    """``parts`` written one after the other, each encoded as it is written (a run's many results are
    never one string, nor that string's bytes, in memory)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for part in parts:
            f.write(_utf8(part))
    os.replace(tmp, path)


def write_results_jsonl(path: str | Path, results: Sequence[ResultItem], *, ordered: bool = False) -> None:
    """One result per line, in :func:`sort_results` order (``ordered``: ``results`` already are)."""
    rows = results if ordered else sort_results(results)
    _atomic_write_parts(Path(path), (_LINE.encode(r.to_dict()) + "\n" for r in rows))


def write_outputs(
    out_dir: str | Path,
    summary: dict[str, Any],
    results: list[ResultItem],
    *,
    timeline: Sequence[dict[str, Any]] | None = None,
    per_model: dict[str, dict[str, Any]] | None = None,
    top: int = 20,
    sections: Sequence[str] = (),
    html_sections: Sequence[str] = (),
) -> None:
    """Write the four outputs. ``timeline`` items are ``{session_id, start, end, state}`` (seconds);
    ``per_model`` maps a model to ``{calls, tokens, cost_usd, …}``; both default to the summary's
    ``timeline`` / ``per_model`` keys when present. ``sections`` (markdown) and ``html_sections``
    (HTML) are what other planes add to the reports (the run's changes, the decision audit)."""
    from agent_fleet.aggregate.report_html import render_html
    from agent_fleet.aggregate.report_md import render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    models = per_model if per_model is not None else summary.get("per_model") or {}
    sessions = list(timeline if timeline is not None else summary.get("timeline") or [])
    groups = group_by_category(results)  # sorted once for all three
    write_results_jsonl(out / "results.jsonl", [r for _, items in groups for r in items], ordered=True)
    _atomic_write(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    _atomic_write(out / "report.md", render_markdown(summary, groups, per_model=models, top=top, sections=sections))
    page = render_html(summary, groups, per_model=models, timeline=sessions, top=top, sections=html_sections)
    _atomic_write(out / "report.html", page)
