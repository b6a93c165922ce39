"""Build items.jsonl and pairs.jsonl from sources.py (run: python tests/data/dedup/build.py).

Variants of a group (all must merge with each other):
  original    the text as written, located in the group's first file
  reformat    same words, other case, punctuation and spacing (an exact duplicate after normalising)
  reorder     the sentences in another order
  truncated   the last sentence (usually the remedy) left out
  cross_file  the same finding, word for word, reported for another file
  paraphrase  hand-written: the same content in other words
Pairs that must not merge: every pair across two groups of one family (hard negatives: same subject,
different finding) and a seeded sample of pairs across families (unrelated).
The split (calibration / test) is by family, so a hard-negative pair never straddles it.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sources import GROUPS  # noqa: E402

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9a-z])")


def sentences(text: str) -> list[str]:
    if "\n" in text:  # code: not prose
        return [text]
    return [s for s in _SENTENCE.split(text) if s]


def reformat(text: str) -> str:
    out = re.sub(r"[,;:]", "", text.upper())
    return re.sub(r" ", "  ", out).replace(".", " . ")


def _families_in_order() -> list[str]:
    return list(dict.fromkeys(g["family"] for g in GROUPS))


def split_of(family: str) -> str:
    """Families alternate between the halves in order of appearance, so each task type is in both."""
    return "calibration" if _families_in_order().index(family) % 2 == 0 else "test"


def variants(group: dict[str, Any]) -> list[dict[str, Any]]:
    files = group.get("files") or [None]
    first = files[0]
    text = group["text"]

    def fill(t: str, f: str | None) -> str:
        return t.replace("{file}", f) if f else t

    base = {"group": group["id"], "family": group["family"], "task_type": group["task_type"]}
    base["category"] = group.get("category")
    out = [dict(base, variant="original", title=group["title"], body=fill(text, first), location=first)]
    out.append(
        dict(base, variant="reformat", title=group["title"].upper(), body=reformat(fill(text, first)), location=first)
    )
    sent = sentences(fill(text, first))
    if len(sent) >= 2:
        order = list(range(len(sent)))
        rng = random.Random(group["id"])
        while order == sorted(order):
            rng.shuffle(order)
        body = " ".join(sent[i] for i in order)
        out.append(dict(base, variant="reorder", title=group["title"], body=body, location=first))
    if len(sent) >= 3:
        out.append(dict(base, variant="truncated", title=group["title"], body=" ".join(sent[:-1]), location=first))
    for f in files[1:]:
        out.append(dict(base, variant="cross_file", title=group["title"], body=fill(text, f), location=f))
    for title, para in group.get("paraphrases", []):
        out.append(dict(base, variant="paraphrase", title=title, body=fill(para, first), location=first))
    for n, item in enumerate(out):
        item["id"] = f"{group['id']}/{n}-{item['variant']}"
        item["split"] = split_of(group["family"])
    return out


def build() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    items: list[dict[str, Any]] = []
    by_group: dict[str, list[dict[str, Any]]] = {}
    for g in GROUPS:
        vs = variants(g)
        by_group[g["id"]] = vs
        items.extend(vs)
    pairs: list[dict[str, Any]] = []
    for vs in by_group.values():
        for a, b in itertools.combinations(vs, 2):
            kind = b["variant"] if a["variant"] == "original" else "variant_pair"
            pairs.append({"a": a["id"], "b": b["id"], "label": "merge", "kind": kind, "split": a["split"]})
    families: dict[str, list[str]] = {}
    for g in GROUPS:
        families.setdefault(g["family"], []).append(g["id"])
    for members in families.values():
        for ga, gb in itertools.combinations(members, 2):
            for a in by_group[ga]:
                for b in by_group[gb]:
                    pairs.append(
                        {"a": a["id"], "b": b["id"], "label": "distinct", "kind": "hard_negative", "split": a["split"]}
                    )
    rng = random.Random(20261130)
    seen: set[tuple[str, str]] = set()
    originals = [vs[0] for vs in by_group.values()]
    while len(seen) < 400:
        a, b = rng.sample(originals, 2)
        if a["family"] == b["family"] or a["split"] != b["split"]:
            continue
        key = (min(a["id"], b["id"]), max(a["id"], b["id"]))
        if key in seen:
            continue
        seen.add(key)
        pairs.append({"a": key[0], "b": key[1], "label": "distinct", "kind": "unrelated", "split": a["split"]})
    return items, pairs


def main() -> None:
    items, pairs = build()
    with (HERE / "items.jsonl").open("w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it, ensure_ascii=False, sort_keys=True) + "\n")
    with (HERE / "pairs.jsonl").open("w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps(p, ensure_ascii=False, sort_keys=True) + "\n")
    merge = sum(p["label"] == "merge" for p in pairs)
    print(f"{len(items)} items, {len(pairs)} pairs ({merge} must merge, {len(pairs) - merge} must not)")


if __name__ == "__main__":
    main()
