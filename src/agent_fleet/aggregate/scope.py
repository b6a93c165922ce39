"""The scope of merging: which results may be folded into one.

* ``global``: any two results that say the same thing merge, wherever they were found (a bug class
  reported in five files is one finding with five places). The default for finding-style tasks.
* ``item``: only results about the same input item (their ``location``, else their partition) are
  compared; results about different items merge only when their text is byte-identical. The default
  for per-item tasks — a summary of each page, a translation of each text, tests for each module —
  where two similar summaries of two pages are still two results.
* ``none``: only byte-identical results merge.

Merged results are never lost: the representative lists every member (see ``Aggregator``).
"""

from __future__ import annotations

import re
from enum import StrEnum

from agent_fleet.aggregate.bands import TaskType, classify_task
from agent_fleet.domain.results import ResultItem

__all__ = ["DedupScope", "default_scope", "resolve_scope", "scope_key"]


class DedupScope(StrEnum):
    GLOBAL = "global"
    ITEM = "item"
    NONE = "none"


# "each page", "every file", "per row", "one summary per URL", "summarise these pages"
_PER_ITEM = re.compile(
    r"\b(each|every|per)\b|\bsummari[sz]e\s+(these|the|all|those)\b|\bone\s+\w+\s+(for|per)\b", re.IGNORECASE
)


def default_scope(task: str, input_kind: str | None = None) -> tuple[DedupScope, str]:
    """The scope for a task when fleet.yaml names none, and why."""
    kind = classify_task(task, input_kind)
    if kind == TaskType.TRANSLATION:
        return DedupScope.ITEM, "default for translation: each text's translation is its own result"
    m = _PER_ITEM.search(task)
    if m:
        return DedupScope.ITEM, f"default for a per-item task (the task says {m.group(0).strip()!r})"
    return DedupScope.GLOBAL, f"default for {kind.value.replace('_', ' ')}: the same finding merges across items"


def resolve_scope(setting: str | None, task: str, input_kind: str | None = None) -> tuple[DedupScope, str]:
    """fleet.yaml's ``aggregate.dedup_scope`` (``auto`` or unset: :func:`default_scope`)."""
    if setting and setting != "auto":
        return DedupScope(setting), "aggregate.dedup_scope in fleet.yaml"
    return default_scope(task, input_kind)


def scope_key(item: ResultItem, scope: DedupScope | str) -> str:
    """Results with different keys are never near-duplicates of each other."""
    if scope == DedupScope.GLOBAL:
        return ""
    if scope == DedupScope.ITEM:
        return f"loc:{item.location}" if item.location else f"part:{item.partition_id}"
    return f"id:{item.id}"
