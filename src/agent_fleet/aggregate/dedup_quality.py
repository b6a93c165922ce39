"""Deduplication quality on labelled pairs: precision and recall of the pairs the rule merges.

A pair is *merged* when both texts normalise to the same hash (the exact-duplicate step) or their
cosine reaches the threshold — the rule a two-result run applies. Precision is the share of merged
pairs that were labelled "merge"; recall is the share of "merge" pairs that were merged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.embedders import Embedder, embed_sync
from agent_fleet.aggregate.text import content_hash, embedding_text
from agent_fleet.aggregate.vectors import dot
from agent_fleet.domain.results import ResultItem

__all__ = ["LabelledPair", "PairQuality", "load_labelled", "pair_similarities", "score_pairs", "sweep"]


@dataclass(frozen=True, slots=True)
class LabelledPair:
    a: str
    b: str
    merge: bool
    kind: str = ""
    split: str = ""


@dataclass(frozen=True, slots=True)
class PairQuality:
    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (merged, total)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "by_kind": {k: {"merged": m, "pairs": n} for k, (m, n) in sorted(self.by_kind.items())},
        }


def load_labelled(folder: str | Path) -> tuple[dict[str, ResultItem], list[LabelledPair]]:
    """Read ``items.jsonl`` and ``pairs.jsonl`` of a labelled set (tests/data/dedup has the format)."""
    root = Path(folder)
    items: dict[str, ResultItem] = {}
    for line in (root / "items.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            items[d["id"]] = ResultItem.from_dict(
                {"partition_id": d.get("group", ""), "session_id": d.get("variant", ""), **d}
            )
    pairs = []
    for line in (root / "pairs.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            pairs.append(LabelledPair(d["a"], d["b"], d["label"] == "merge", d.get("kind", ""), d.get("split", "")))
    return items, pairs


def pair_similarities(
    embedder: Embedder, items: dict[str, ResultItem], pairs: Iterable[LabelledPair]
) -> dict[tuple[str, str], float]:
    """Cosine per pair; 1.0 for pairs that are exact duplicates after normalising (never embedded)."""
    pairs = list(pairs)
    ids = sorted({p.a for p in pairs} | {p.b for p in pairs})
    vectors = dict(zip(ids, embed_sync(embedder, [embedding_text(items[i]) for i in ids]), strict=True))
    hashes = {i: content_hash(items[i]) for i in ids}
    return {(p.a, p.b): 1.0 if hashes[p.a] == hashes[p.b] else float(dot(vectors[p.a], vectors[p.b])) for p in pairs}


def score_pairs(pairs: Sequence[LabelledPair], sims: dict[tuple[str, str], float], threshold: float) -> PairQuality:
    tp = fp = fn = tn = 0
    by_kind: dict[str, list[int]] = {}
    for p in pairs:
        merged = sims[(p.a, p.b)] >= threshold
        counts = by_kind.setdefault(p.kind, [0, 0])
        counts[0] += merged
        counts[1] += 1
        if p.merge and merged:
            tp += 1
        elif p.merge:
            fn += 1
        elif merged:
            fp += 1
        else:
            tn += 1
    return PairQuality(threshold, tp, fp, fn, tn, {k: (v[0], v[1]) for k, v in by_kind.items()})


def sweep(
    pairs: Sequence[LabelledPair], sims: dict[tuple[str, str], float], thresholds: Iterable[float]
) -> list[PairQuality]:
    return [score_pairs(pairs, sims, t) for t in thresholds]
