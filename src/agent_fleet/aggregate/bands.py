"""The dedup rates we claim per task type, and the check of a run against its claim.

Claims (the share of raw results that are duplicates): web research 40–50 %, code analysis
50–60 %, documentation 60–70 %, translation low (read here as at most 20 %), test generation high
(read here as at least 60 %). :func:`band_check` says whether a run's rate is inside its band and,
when it is not, what the data showed, so the report can state it instead of hiding it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_fleet.aggregate.aggregator import AggregateStats

__all__ = ["CLAIMED_BANDS", "BandCheck", "TaskType", "band_check", "classify_task"]


class TaskType(StrEnum):
    WEB_RESEARCH = "web_research"
    CODE_ANALYSIS = "code_analysis"
    DOCUMENTATION = "documentation"
    TRANSLATION = "translation"
    TEST_GENERATION = "test_generation"
    OTHER = "other"


CLAIMED_BANDS: dict[TaskType, tuple[float, float]] = {
    TaskType.WEB_RESEARCH: (0.40, 0.50),
    TaskType.CODE_ANALYSIS: (0.50, 0.60),
    TaskType.DOCUMENTATION: (0.60, 0.70),
    TaskType.TRANSLATION: (0.0, 0.20),
    TaskType.TEST_GENERATION: (0.60, 1.0),
}

_KEYWORDS: tuple[tuple[TaskType, tuple[str, ...]], ...] = (
    (TaskType.TRANSLATION, ("translat",)),
    (TaskType.TEST_GENERATION, ("write test", "generate test", "unit test", "test case", "tests for")),
    (TaskType.DOCUMENTATION, ("document", "docstring", "readme", "docs ")),
    (TaskType.WEB_RESEARCH, ("research", "summari", "web page", "url", "article")),
    (TaskType.CODE_ANALYSIS, ("review", "audit", "bug", "vulnerab", "security", "analy", "lint", "smell")),
)


def classify_task(task: str, input_kind: str | None = None) -> TaskType:
    """A task type from the task text (keywords), else from the input: a directory is code analysis,
    a list of URLs is web research."""
    text = f" {task.lower()} "
    for kind, words in _KEYWORDS:
        if any(w in text for w in words):
            return kind
    if input_kind == "directory":
        return TaskType.CODE_ANALYSIS
    if input_kind == "list" and ("http://" in text or "https://" in text):
        return TaskType.WEB_RESEARCH
    return TaskType.OTHER


@dataclass(frozen=True, slots=True)
class BandCheck:
    task_type: TaskType
    dedup_rate: float
    band: tuple[float, float] | None
    inside: bool | None  # None when the task type claims no band
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_type": str(self.task_type),
            "dedup_rate": round(self.dedup_rate, 4),
            "claimed_band": list(self.band) if self.band else None,
            "inside": self.inside,
            "note": self.note,
        }


def band_check(task_type: TaskType | str, stats: AggregateStats) -> BandCheck:
    kind = TaskType(task_type)
    band = CLAIMED_BANDS.get(kind)
    rate = stats.dedup_rate
    shown = (
        f"{stats.raw} raw results, {stats.unique} unique ({stats.exact_duplicates} exact and "
        f"{stats.near_duplicates} near duplicates at cosine >= {stats.threshold:g} with {stats.embedder})"
    )
    about = stats.identity.get("location", 0) + stats.identity.get("text", 0)
    if about and stats.scope == "auto":
        # results about distinct input items never merge: a low rate there is the input, not a miss
        shown += f"; {about} of them are about an input item and merge only with results about the same one"
    if band is None:
        return BandCheck(kind, rate, None, None, f"dedup {rate:.0%}; no claim for this task type: {shown}")
    lo, hi = band
    inside = lo <= rate <= hi
    where = "inside" if inside else ("below" if rate < lo else "above")
    note = f"dedup {rate:.0%} is {where} the {lo:.0%}–{hi:.0%} claimed for {kind.value.replace('_', ' ')}: {shown}"
    if stats.raw < 30:
        note += "; too few results for the rate to say much"
    return BandCheck(kind, rate, band, inside, note)
