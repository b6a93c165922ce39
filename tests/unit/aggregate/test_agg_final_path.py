"""The run's final path (``extend`` then ``finalize``: no streaming decision for what live dedup did
not reach, only compared texts embedded, a lone result skipping the index) gives the clusters of the
path it replaced (every result streamed, every text embedded, then the final pass), on a realistic
sample: the labelled findings of tests/data/dedup as many sessions report them (light edits, other
places, other confidences, exact and byte-identical copies, no category for some), beside per-page
summaries that are alone in their scope. The reference's own clusters are checked against brute
force, and the lexical vectors and the normalised text against the plain code they replaced."""

from __future__ import annotations

import json
import math
import random
import re
import unicodedata
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_agg_aggregator import CountingEmbedder

from agent_fleet.aggregate import AggregateConfig, Aggregator, DedupScope, LexicalEmbedder, normalize_text
from agent_fleet.aggregate.categorize import _central
from agent_fleet.aggregate.index import PyDenseLeaderIndex
from agent_fleet.aggregate.vectors import SparseVector, dot
from agent_fleet.domain.results import ResultItem

DATA = Path(__file__).resolve().parents[2] / "data" / "dedup" / "items.jsonl"
_LABELS = ("group", "family", "task_type", "variant", "split")


def realistic_sample(n_findings: int, n_summaries: int, seed: int = 5) -> list[ResultItem]:
    rng = random.Random(seed)
    labelled = [json.loads(line) for line in DATA.read_text().splitlines()]
    out: list[dict[str, Any]] = []
    for k in range(n_findings):
        d = {key: v for key, v in rng.choice(labelled).items() if key not in _LABELS}
        words = d["body"].split()
        for _ in range(rng.randrange(0, 3)):  # light edits: near duplicates at many similarities
            words[rng.randrange(len(words))] = rng.choice(["the", "a", "module", "value", "error"])
        d["body"] = " ".join(words)
        if rng.random() < 0.1:  # the same text reformatted: an exact duplicate after normalising
            d["body"] = d["body"].upper() + "  !"
        d["confidence"] = rng.choice([None, 0.5, 0.6, 0.7, 0.8, 0.9])
        d["location"] = rng.choice([d.get("location"), f"src/m{rng.randrange(40)}.py", None])
        if rng.random() < 0.3:
            d["category"] = None
        d["id"] = f"run.s{k // 7:05d}.r{k % 7:04d}"
        out.append(d)
    for k in range(n_summaries):  # one summary per page, byte-identical for a few pages
        page = k - k % 2 if k % 50 < 4 else k
        body = f"Research note on https://docs.example.org/topic-{page % 97}/page-{page}. Key terms: topic, page."
        out.append({"id": f"run.s{9000 + k // 10:05d}.r{k % 10:04d}", "title": "docs: topic page", "body": body})
        out[-1].update(location=f"https://docs.example.org/topic-{k % 97}/page-{k}", category="documentation")
    rng.shuffle(out)  # results arrive in whatever order sessions finish
    items = []
    for d in out:
        session = d["id"].rsplit(".", 1)[0]
        items.append(ResultItem.from_dict({**d, "session_id": session, "partition_id": "p" + session[-4:]}))
    return items


def view(agg: Aggregator, reps: list[ResultItem]) -> dict[str, Any]:
    stats = agg.stats().to_dict()
    work = {k: stats.pop(k) for k in ("embedded", "cache_hits")}
    decisions = sorted((d.to_dict() for d in agg.decisions()), key=lambda d: d["item_id"])
    return {"reps": [r.to_dict() for r in reps], "stats": stats, "decisions": decisions, "work": work}


async def streamed_then_final(items: list[ResultItem], scope: DedupScope) -> tuple[dict[str, Any], list[str]]:
    """The replaced path: every result through the streaming pass (and its embedding), then the pass."""
    emb = CountingEmbedder()
    agg = Aggregator(emb, config=AggregateConfig(scope=scope))
    for start in range(0, len(items), 512):
        await agg.add_many(items[start : start + 512])
    return view(agg, await agg.finalize()), emb.seen


async def final_path(items: list[ResultItem], scope: DedupScope, live: int) -> tuple[dict[str, Any], list[str]]:
    """The run's path: the first ``live`` results streamed as they came, all of them given to the pass."""
    emb = CountingEmbedder()
    agg = Aggregator(emb, config=AggregateConfig(scope=scope))
    for start in range(0, live, 256):
        await agg.add_many(items[start : min(live, start + 256)])
    await agg.extend(items)
    return view(agg, await agg.finalize()), emb.seen


@pytest.mark.parametrize("scope", [DedupScope.GLOBAL, DedupScope.ITEM, DedupScope.NONE])
async def test_the_final_path_gives_the_clusters_of_the_streamed_path(scope: DedupScope) -> None:
    items = realistic_sample(900, 600)
    expected, embedded_all = await streamed_then_final(items, scope)
    near = {DedupScope.GLOBAL: 50, DedupScope.ITEM: 0}  # with "none" only byte-identical results merge
    assert expected["stats"]["near_duplicates"] > near.get(scope, -1)
    assert expected["stats"]["exact_duplicates"] >= 10  # byte-identical notes on two pages stay two
    for live in (0, 300):
        got, embedded = await final_path(items, scope, live)
        assert got["reps"] == expected["reps"]
        assert got["decisions"] == expected["decisions"]
        assert got["stats"] == expected["stats"]
        # each text embedded from the same result as before (a model may tell case and punctuation apart)
        assert set(embedded) <= set(embedded_all)
        if scope is not DedupScope.GLOBAL:  # a summary alone in its scope is compared with nothing, on
            # either path: neither embeds it
            lone = {r.title + "\n" + r.body for r in items if r.title == "docs: topic page"}
            assert lone and not lone & (set(embedded) | set(embedded_all))


async def test_results_streamed_after_the_final_path_decide_as_if_every_result_had_streamed() -> None:
    items = realistic_sample(400, 200, seed=9)
    early, late = items[:-60], items[-60:]
    reference = Aggregator(LexicalEmbedder(), config=AggregateConfig(scope=DedupScope.ITEM))
    await reference.add_many(early)
    expected_late = await reference.add_many(late)
    expected_provisional = reference.decisions()

    agg = Aggregator(LexicalEmbedder(), config=AggregateConfig(scope=DedupScope.ITEM))
    await agg.add_many(early[:100])
    await agg.extend(early)
    await agg.finalize()  # a resumed dispatch then brings the late results
    assert await agg.add_many(late) == expected_late
    assert agg.decisions() == expected_provisional
    assert agg.stats().final is False


async def test_the_streamed_reference_is_the_greedy_rule_by_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    items = realistic_sample(300, 100, seed=2)
    for scope in (DedupScope.GLOBAL, DedupScope.ITEM):
        expected, _ = await streamed_then_final(items, scope)
        with monkeypatch.context() as m:
            m.setattr(
                "agent_fleet.aggregate.aggregator.make_index",
                lambda kind, *, threshold, **_: PyDenseLeaderIndex(threshold=threshold),
            )
            brute, _ = await streamed_then_final(items, scope)
        assert brute == expected


_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)


def plain_normalize(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NON_WORD.sub(" ", folded).replace("_", " ").split())


def plain_vector(text: str, ngram: int = 4, buckets: int = 1 << 20, word_weight: float = 1.0) -> SparseVector:
    norm = plain_normalize(text)
    padded = f" {norm} "
    counts = Counter(
        zlib.crc32(padded[i : i + ngram].encode("utf-8")) & (buckets - 1)
        for i in range(max(1, len(padded) - ngram + 1))
    )
    words = Counter(zlib.crc32(w.encode("utf-8"), 0x5BD1E995) & (buckets - 1) for w in norm.split())
    weights = {key: 1.0 + math.log(tf) for key, tf in counts.items()}
    for key, tf in words.items():
        weights[key] = weights.get(key, 0.0) + word_weight * (1.0 + math.log(tf))
    norm2 = math.sqrt(math.fsum(w * w for w in weights.values()))
    return {k: w / norm2 for k, w in weights.items() if w != 0.0} if norm2 else {}


def test_lexical_vectors_and_normalised_text_equal_the_plain_code() -> None:
    rng = random.Random(4)
    alphabet = "abcXYZ019_ -.,;:!?\t\n\x00\x7f'\"()[]{}<>/\\|@#$%^&*+=~`é€ßİﬁＡ１\u00a0\u2003日本"
    texts = [r.title + "\n" + r.body for r in realistic_sample(200, 50)]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 80))) for _ in range(2000)]
    texts += ["", " ", "_", "__init__", "foo_bar Foo-Bar", "aaaa " * 40, "".join(map(chr, range(128)))]
    emb = LexicalEmbedder()
    for text in texts:
        assert normalize_text(text) == plain_normalize(text)
        got, want = emb.vector(text), plain_vector(text)
        assert got == want
        assert list(got) == list(want)  # the same key order: dot products add up in the same order


def test_the_central_member_is_the_one_of_the_plain_sums() -> None:
    def plain_central(members: list[int], vectors: list[SparseVector]) -> int:
        best, best_score = members[0], float("-inf")
        for i in members:
            score = sum(dot(vectors[i], vectors[j]) for j in members if j != i)
            if score > best_score:
                best, best_score = i, score
        return best

    emb = LexicalEmbedder()
    vectors = [emb.vector(r.title + "\n" + r.body) for r in realistic_sample(600, 0)]
    rng = random.Random(1)
    for _ in range(200):
        members = rng.sample(range(len(vectors)), rng.choice([2, 3, 5, 12, 30]))
        assert _central(members, vectors) == plain_central(members, vectors)
    # two vectors as long as each other whose product rounds differently each way round: the sum
    # of the second member is its own product, not the first one's reused
    a, b = next(
        (i, j)
        for i in range(len(vectors))
        for j in range(i + 1, len(vectors))
        if len(vectors[i]) == len(vectors[j]) and dot(vectors[j], vectors[i]) > dot(vectors[i], vectors[j])
    )
    assert _central([a, b], vectors) == plain_central([a, b], vectors) == b
