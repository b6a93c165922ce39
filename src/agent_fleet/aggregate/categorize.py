"""Categories for the representatives: the agent's own when given, else one found by clustering.

Representatives without a category are grouped by greedy leader clustering at a looser threshold
than deduplication (same rule, so every member is within it of its group's leader). A group of two
or more is named by its most central member (the highest summed similarity to the others) or, when
a :class:`CategoryNamer` is given, by one cheap model call per group; a result alike to no other
goes to ``other``. Agent-given categories are trimmed and lowercased so "Security" and "security "
make one section.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from agent_fleet.aggregate.index import make_index
from agent_fleet.aggregate.text import rank_key
from agent_fleet.aggregate.vectors import Vector, VectorKind, dot
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.results import ResultItem
from agent_fleet.spend.port import ModelGateway

__all__ = ["OTHER", "CategoryNamer", "ModelCategoryNamer", "assign_categories", "canonical_category"]

OTHER = "other"


class CategoryNamer(Protocol):
    async def name(self, members: Sequence[ResultItem]) -> str: ...


def canonical_category(category: str | None) -> str | None:
    if category is None:
        return None
    text = " ".join(str(category).split()).lower()
    return text or None


_REUSE_UP_TO = 1024  # members whose pairwise similarities are kept for the way back (a few MB at most)


def _symmetric(a: Vector, b: Vector) -> bool:
    """Whether ``dot(a, b)`` and ``dot(b, a)`` round alike: a sparse product adds up in the order of
    the shorter vector's features (of the second one's when both are as long); a dense one exactly."""
    return not isinstance(a, dict) or len(a) != len(b)


def _central(members: Sequence[int], vectors: Sequence[Vector]) -> int:
    """The member with the highest summed similarity to the others (the first of equals). Each pair's
    similarity is computed once where both ways round alike; the sums add up as member order has it."""
    rows: list[list[float]] = []
    reuse = len(members) <= _REUSE_UP_TO
    best, best_score = members[0], float("-inf")
    for p, i in enumerate(members):
        row = []
        for q, j in enumerate(members):
            if q < p and reuse and _symmetric(vectors[i], vectors[j]):
                row.append(rows[q][p - 1])  # row q leaves out member q itself
            elif q != p:
                row.append(dot(vectors[i], vectors[j]))
        if reuse:
            rows.append(row)
        score = sum(row)
        if score > best_score:
            best, best_score = i, score
    return best


def _label(title: str, limit: int = 60) -> str:
    text = " ".join(title.split()).rstrip(".")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def assign_categories(
    results: Sequence[ResultItem],
    vector_of: Callable[[ResultItem], Vector],
    *,
    kind: VectorKind,
    threshold: float,
    namer: CategoryNamer | None = None,
) -> list[ResultItem]:
    """Copies of ``results`` (same order) where each has a category; ``extra["category_source"]``
    says where it came from: ``agent``, ``cluster`` or ``model``."""
    out = list(results)
    todo = []
    for pos, r in enumerate(out):
        cat = canonical_category(r.category)
        if cat is not None:
            out[pos] = replace(r, category=cat, extra={**r.extra, "category_source": "agent"})
        else:
            todo.append(pos)
    if not todo:
        return out
    order = sorted(todo, key=lambda p: rank_key(out[p], p))
    vectors = [vector_of(out[p]) for p in order]
    assigned = make_index(kind, threshold=threshold, ann="exact").assign(vectors)
    groups: dict[int, list[int]] = {}
    for pos, a in enumerate(assigned):
        groups.setdefault(a.leader, []).append(pos)
    taken: set[str] = {r.category for r in out if r.category}
    for members in groups.values():
        items = [out[order[m]] for m in members]
        if len(members) == 1:
            name, source = OTHER, "cluster"
        elif namer is not None:
            name, source = canonical_category(await namer.name(items)) or OTHER, "model"
        else:
            name, source = _label(out[order[_central(members, vectors)]].title).lower(), "cluster"
        if source != "model" and name != OTHER:
            base, n = name, 2
            while name in taken:  # two groups whose central titles coincide stay apart
                name, n = f"{base} ({n})", n + 1
            taken.add(name)
        for m in members:
            r = out[order[m]]
            out[order[m]] = replace(r, category=name, extra={**r.extra, "category_source": source})
    return out


class ModelCategoryNamer:
    """One call per group: "name these findings in two to four words"."""

    def __init__(self, gateway: ModelGateway, *, model: str, session_id: str, max_members: int = 8) -> None:
        self._gateway = gateway
        self._model = model
        self._session_id = session_id
        self._max_members = max_members

    async def name(self, members: Sequence[ResultItem]) -> str:
        shown = "\n".join(f"- {m.title}" for m in members[: self._max_members])
        request = ChatRequest(
            model=self._model,
            messages=[
                {
                    "role": "user",
                    "content": "Name the common category of these findings in two to four words. "
                    f"Answer with the name only.\n{shown}",
                }
            ],
            max_tokens=16,
            temperature=0.0,
        )
        response = await self._gateway.complete(self._session_id, request)
        text = (response.content or "").strip().splitlines()
        return _label(text[0].strip(" \"'*#.")) if text else OTHER
