"""The streaming aggregator: decisions, the final pass, the cache and resumes, stats."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agent_fleet.aggregate import AggregateConfig, Aggregator, DecisionKind, EmbeddingCache, LexicalEmbedder
from agent_fleet.aggregate.vectors import Vector, VectorKind, normalized_dense
from agent_fleet.domain.results import ResultItem


def r(id_: str, title: str, body: str = "", *, conf: float | None = None, cat: str | None = None, **extra: object):
    return ResultItem(
        id=id_,
        partition_id=f"p-{id_}",
        session_id=f"s-{id_}",
        title=title,
        body=body,
        confidence=conf,
        category=cat,
        location=extra.pop("location", None),  # type: ignore[arg-type]
        extra=dict(extra),
    )


class CountingEmbedder:
    """A lexical embedder that records every text it is asked to embed."""

    kind: VectorKind = "sparse"
    default_threshold = 0.85
    name = "counting-lexical"

    def __init__(self) -> None:
        self.inner = LexicalEmbedder()
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        self.seen.extend(texts)
        return self.inner.encode(texts)

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        return self.encode(texts)


class TableEmbedder:
    """Dense vectors looked up by title: lets a test place texts at exact cosines."""

    kind: VectorKind = "dense"
    default_threshold = 0.9
    name = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        return [normalized_dense(self.table[t.splitlines()[0]]) for t in texts]


BODY = "The login query concatenates the user name into the SQL statement, so a quote in it changes the query."


async def test_streaming_decisions_exact_near_new() -> None:
    agg = Aggregator(LexicalEmbedder())
    d1 = await agg.add(r("a", "SQL injection in login", BODY, conf=0.5))
    d2 = await agg.add(r("b", "sql injection in LOGIN!", BODY.upper(), conf=0.9))
    d3 = await agg.add(r("c", "SQL injection in login", BODY + " Use bound parameters.", conf=0.7))
    d4 = await agg.add(r("d", "Weak hashing", "Passwords are hashed with MD5 and no salt.", conf=0.7))
    assert (d1.kind, d1.leader_id) == (DecisionKind.NEW, "a")
    assert (d2.kind, d2.leader_id, d2.exact_of, d2.similarity) == (DecisionKind.EXACT_DUPLICATE, "a", "a", 1.0)
    assert (d3.kind, d3.leader_id) == (DecisionKind.NEAR_DUPLICATE, "a")
    assert 0.85 <= d3.similarity < 1.0
    assert d4.kind == DecisionKind.NEW
    s = agg.stats()
    assert (s.raw, s.unique, s.exact_duplicates, s.near_duplicates, s.final) == (4, 2, 1, 1, False)
    assert s.dedup_rate == pytest.approx(0.5)


async def test_final_pass_keeps_the_best_member_with_similarities() -> None:
    agg = Aggregator(LexicalEmbedder(), config=AggregateConfig(categorize=False))
    await agg.add(r("low", "SQL injection in login", BODY, conf=0.4, location="a.py"))
    await agg.add(r("mid", "SQL injection in login", BODY + " Use bound parameters.", conf=0.6, location="b.py"))
    await agg.add(r("top", "SQL injection in login!", BODY.lower(), conf=0.95, location="a.py"))
    # streaming made the first arrival the leader
    assert [x.id for x in agg.representatives()] == ["low"]
    reps = await agg.finalize()
    assert [x.id for x in reps] == ["top"]
    (top,) = reps
    assert set(top.duplicates) == {"low", "mid"}
    sims = top.extra["duplicate_similarity"]
    assert sims["low"] == 1.0  # same normalised text
    assert 0.85 <= sims["mid"] < 1.0
    assert top.extra["duplicate_locations"] == ["b.py"]
    assert list(top.duplicates) == sorted(top.duplicates, key=lambda i: -sims[i])
    assert agg.stats().final
    decisions = {d.item_id: d for d in agg.decisions()}
    assert decisions["low"].kind == DecisionKind.EXACT_DUPLICATE and decisions["low"].exact_of == "top"
    assert decisions["mid"].kind == DecisionKind.NEAR_DUPLICATE and decisions["mid"].leader_id == "top"


async def test_ties_go_to_the_most_complete_body_then_the_earliest() -> None:
    table = {"x": [1.0, 0.0], "y": [1.0, 0.05], "z": [1.0, 0.1]}
    agg = Aggregator(TableEmbedder(table), config=AggregateConfig(categorize=False))
    await agg.add(r("first", "x", "short", conf=0.8))
    await agg.add(r("longer", "y", "a longer body", conf=0.8))
    await agg.add(r("same-length", "z", "a longer body", conf=0.8))
    (rep,) = await agg.finalize()
    assert rep.id == "longer"
    assert set(rep.duplicates) == {"first", "same-length"}


async def test_final_pass_does_not_chain() -> None:
    # cos(a,b) ~ 0.95 and cos(b,c) ~ 0.95 reach 0.9, cos(a,c) ~ 0.81 does not. a leads (highest
    # confidence) and takes b; c is close to b but not to a, so it must stay apart.
    table = {"a": [1.0, 0.0], "b": [1.0, 0.33], "c": [1.0, 0.72]}
    agg = Aggregator(TableEmbedder(table), config=AggregateConfig(categorize=False))
    await agg.add(r("a", "a", conf=0.9))
    await agg.add(r("b", "b", conf=0.5))
    await agg.add(r("c", "c", conf=0.4))
    reps = {x.id: x for x in await agg.finalize()}
    assert set(reps) == {"a", "c"}
    assert reps["a"].duplicates == ("b",)


async def test_exact_duplicates_are_never_embedded_and_ids_are_idempotent() -> None:
    emb = CountingEmbedder()
    agg = Aggregator(emb)
    await agg.add(r("a", "Title", BODY))
    await agg.add(r("b", "TITLE", BODY + "!!"))
    await agg.add_many([r("c", "title", "  " + BODY.lower()), r("d", "Other", "Something else entirely.")])
    again = await agg.add(r("a", "Title", BODY))
    assert len(emb.seen) == 2
    assert again.kind == DecisionKind.NEW
    assert len(agg) == 4


async def test_cache_makes_a_resumed_run_embed_nothing(tmp_path: Path) -> None:
    items = [r(str(i), f"Finding {i}", f"Body number {i} about module m{i % 7}.", conf=0.5) for i in range(40)]
    first_emb = CountingEmbedder()
    first = Aggregator.for_run(tmp_path, first_emb)
    await first.add_many(items[:25])  # the run stops here
    first.cache.close()  # type: ignore[union-attr]
    assert len(first_emb.seen) == 25

    resumed_emb = CountingEmbedder()
    resumed = Aggregator.for_run(tmp_path, resumed_emb)
    for it in items:  # the resumed run replays every result of the log
        await resumed.add(it)
    assert len(resumed_emb.seen) == 15
    s = resumed.stats()
    assert (s.cache_hits, s.embedded) == (25, 15)
    assert (tmp_path / "embeddings.sqlite").is_file()


async def test_cache_keys_include_the_embedder_name(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    cache.put_many("one", [("h1", {1: 1.0})])
    assert cache.get_many("two", ["h1"]) == {}
    assert cache.get_many("one", ["h1", "h2"]) == {"h1": {1: 1.0}}
    assert (cache.hits, cache.misses) == (1, 2)
    assert cache.count() == 1


async def test_stats_per_category_follow_the_representative() -> None:
    agg = Aggregator(LexicalEmbedder())
    await agg.add(r("a", "SQL injection in login", BODY, conf=0.9, cat="Security"))
    await agg.add(r("b", "SQL injection in login", BODY + " Use parameters.", conf=0.3, cat="bug"))
    await agg.add(r("c", "Slow listing", "The order list runs one query per order.", conf=0.5, cat="performance"))
    await agg.finalize()
    s = agg.stats()
    assert s.per_category["security"].raw == 2
    assert s.per_category["security"].unique == 1
    assert s.per_category["security"].dedup_rate == pytest.approx(0.5)
    assert s.per_category["performance"].dedup_rate == 0.0
    assert "bug" not in s.per_category
    assert s.to_dict()["per_category"]["security"]["raw"] == 2


async def test_uncategorised_results_get_cluster_categories() -> None:
    agg = Aggregator(LexicalEmbedder())
    await agg.add(r("a", "Unsalted MD5 password hashes", "Passwords are stored as unsalted MD5 hashes.", conf=0.9))
    await agg.add(r("b", "Unsalted MD5 password hashes", "Passwords are stored as unsalted MD5 digests.", conf=0.8))
    await agg.add(r("c", "Unrelated", "The README misspells the project name.", conf=0.5))
    reps = await agg.finalize()
    cats = {x.id: (x.category, x.extra["category_source"]) for x in reps}
    assert cats["c"] == ("other", "cluster")
    assert all(c is not None for c, _ in cats.values())
