"""Normalised hashing, the lexical embedder, and the pure-Python leader indexes against brute force."""

from __future__ import annotations

import math
import random
import zlib

import pytest

from agent_fleet.aggregate.embedders import LexicalEmbedder
from agent_fleet.aggregate.index import PyDenseLeaderIndex, SparseLeaderIndex
from agent_fleet.aggregate.text import content_hash, normalize_text, rank_key
from agent_fleet.aggregate.vectors import decode_vector, dense, dot, encode_vector, normalized_dense
from agent_fleet.domain.results import ResultItem


def item(id_: str, title: str, body: str, confidence: float | None = None) -> ResultItem:
    return ResultItem(id=id_, partition_id="p", session_id="s", title=title, body=body, confidence=confidence)


def test_normalisation_ignores_case_punctuation_and_spacing() -> None:
    assert normalize_text("  SQL-Injection in   `login()`!\n") == "sql injection in login"
    a = item("a", "SQL injection", "The login query, concatenates input.")
    b = item("b", "sql  injection!", "the LOGIN query concatenates input")
    c = item("c", "SQL injection", "The logout query concatenates input.")
    assert content_hash(a) == content_hash(b)
    assert content_hash(a) != content_hash(c)


def test_rank_prefers_confidence_then_longer_body_then_earlier() -> None:
    low = item("low", "t", "a long and complete body", 0.5)
    high = item("high", "t", "short", 0.9)
    none = item("none", "t", "the longest body of them all, but no confidence")
    long_tie = item("long", "t", "short body but longer", 0.9)
    ranked = sorted([(low, 0), (high, 1), (none, 2), (long_tie, 3)], key=lambda p: rank_key(*p))
    assert [p[0].id for p in ranked] == ["long", "high", "low", "none"]
    # Same confidence and body: the earlier arrival wins.
    assert rank_key(high, 1) < rank_key(high, 5)


def _lexical_reference(emb: LexicalEmbedder, text: str) -> dict[int, float]:
    """The lexical vector written the obvious way, one n-gram and one word at a time."""
    norm = normalize_text(text)
    mask = emb.buckets - 1
    padded = f" {norm} "
    counts: dict[int, int] = {}
    for i in range(max(1, len(padded) - emb.ngram + 1)):
        key = zlib.crc32(padded[i : i + emb.ngram].encode("utf-8")) & mask
        counts[key] = counts.get(key, 0) + 1
    words: dict[int, int] = {}
    for word in norm.split():
        key = zlib.crc32(word.encode("utf-8"), 0x5BD1E995) & mask
        words[key] = words.get(key, 0) + 1
    weights: dict[int, float] = {}
    for key, tf in counts.items():
        weights[key] = weights.get(key, 0.0) + 1.0 + math.log(tf)
    for key, tf in words.items():
        weights[key] = weights.get(key, 0.0) + emb.word_weight * (1.0 + math.log(tf))
    norm2 = math.sqrt(math.fsum(w * w for w in weights.values()))
    return {k: w / norm2 for k, w in weights.items() if w != 0.0}


@pytest.mark.parametrize(
    "text",
    ["", "a", "abc", "The login query concatenates input, twice: input input.", "Straße naïve 漢字 ﬁle ＳＱＬ", "é"],
)
@pytest.mark.parametrize("emb", [LexicalEmbedder(), LexicalEmbedder(ngram=3, buckets=1 << 8, word_weight=0.5)])
def test_lexical_vector_matches_the_reference_exactly(emb: LexicalEmbedder, text: str) -> None:
    got, want = emb.vector(text), _lexical_reference(emb, text)
    # The same keys in the same order with the same floats: cached vectors stay valid.
    assert list(got.items()) == list(want.items())


def test_lexical_vectors_are_unit_and_order_insensitive() -> None:
    emb = LexicalEmbedder()
    a = emb.vector("The cache is never invalidated. Stale prices are shown to buyers.")
    b = emb.vector("Stale prices are shown to buyers. The cache is never invalidated.")
    c = emb.vector("Passwords are stored with unsalted MD5 hashes in the users table.")
    assert dot(a, a) == pytest.approx(1.0)
    assert dot(a, b) >= emb.default_threshold
    assert dot(a, c) < 0.5


def test_vectors_round_trip_through_bytes() -> None:
    d = normalized_dense([3.0, 4.0, 0.0])
    s = {7: 0.6, 1_000_003: 0.8}
    assert list(decode_vector(encode_vector(d))) == pytest.approx([0.6, 0.8, 0.0])
    back = decode_vector(encode_vector(s))
    assert isinstance(back, dict)
    assert back.keys() == s.keys()
    assert back[7] == pytest.approx(0.6)
    with pytest.raises(TypeError):
        dot(d, s)


def brute_force_greedy(vectors: list, threshold: float) -> list[tuple[int, float]]:
    """The rule, written the obvious way: join the most similar earlier leader at >= threshold."""
    leaders: list[int] = []
    out = []
    for i, v in enumerate(vectors):
        sims = [(dot(v, vectors[j]), j) for j in leaders]
        best = max(sims, default=(float("-inf"), -1), key=lambda p: (p[0], -p[1]))
        if best[0] >= threshold:
            out.append((best[1], best[0]))
        else:
            leaders.append(i)
            out.append((i, 1.0))
    return out


def _sparse_corpus(rng: random.Random, n: int) -> list[dict[int, float]]:
    emb = LexicalEmbedder()
    words = [f"w{k}" for k in range(60)]
    bases = [" ".join(rng.choices(words, k=12)) for _ in range(n // 3)]
    texts = []
    for _ in range(n):
        base = rng.choice(bases).split()
        # small edits make near-duplicates at many different similarities
        for _ in range(rng.randrange(0, 4)):
            base[rng.randrange(len(base))] = rng.choice(words)
        texts.append(" ".join(base))
    return [emb.vector(t) for t in texts]


@pytest.mark.parametrize("threshold", [0.6, 0.8, 0.9])
def test_sparse_prefix_index_equals_brute_force(threshold: float) -> None:
    vectors = _sparse_corpus(random.Random(7), 300)
    expected = brute_force_greedy(vectors, threshold)
    got = SparseLeaderIndex(threshold=threshold).assign(vectors)
    assert [(a.leader, round(a.similarity, 9)) for a in got] == [(e[0], round(e[1], 9)) for e in expected]
    # no chaining: every member is within the threshold of its own leader, and leaders lead themselves
    for i, a in enumerate(got):
        assert dot(vectors[i], vectors[a.leader]) >= threshold - 1e-9
        assert got[a.leader].leader == a.leader


def test_sparse_index_angle_bound_skips_leaders_without_changing_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    # Few, far-apart templates with light edits (and exact repeats, for ties): every query is a
    # near-duplicate of one leader and shares many features with the others, which is where the
    # angle bound between leaders decides instead of scoring every candidate.
    rng = random.Random(11)
    words = [f"w{k}" for k in range(40)]
    templates = [rng.choices(words, k=30) for _ in range(6)]
    texts = []
    for _ in range(400):
        base = list(rng.choice(templates))
        for _ in range(rng.randrange(0, 3)):
            base[rng.randrange(len(base))] = rng.choice(words)
        texts.append(" ".join(base))
    emb = LexicalEmbedder()
    vectors = [emb.vector(t) for t in texts]
    calls = 0

    def counting_dot(a: dict[int, float], b: dict[int, float]) -> float:
        nonlocal calls
        calls += 1
        return dot(a, b)

    monkeypatch.setattr("agent_fleet.aggregate.index.dot", counting_dot)
    for threshold in (0.5, 0.7, 0.85, 0.95):
        expected = brute_force_greedy(vectors, threshold)
        scored = []
        for pair_limit in (0, 1 << 18):  # 0: no leader pairs, so no bound: every candidate is scored
            monkeypatch.setattr("agent_fleet.aggregate.index._PAIR_CACHE_LIMIT", pair_limit)
            calls = 0
            got = SparseLeaderIndex(threshold=threshold).assign(vectors)
            assert [(a.leader, a.similarity) for a in got] == expected
            scored.append(calls)
        if threshold >= 0.85:
            assert scored[1] < scored[0] * 0.6, scored


def test_no_transitive_chaining() -> None:
    # A~B and B~C above the threshold, A~C below: C must not join A through B.
    a = normalized_dense([1.0, 0.0])
    b = normalized_dense([1.0, 0.45])
    c = normalized_dense([1.0, 0.95])
    t = 0.9
    assert dot(a, b) >= t and dot(b, c) >= t and dot(a, c) < t
    got = PyDenseLeaderIndex(threshold=t).assign([a, b, c])
    assert [x.leader for x in got] == [0, 0, 2]


def test_py_dense_index_equals_brute_force() -> None:
    rng = random.Random(3)
    centres = [[rng.gauss(0, 1) for _ in range(16)] for _ in range(20)]
    vectors = [normalized_dense([x + rng.gauss(0, 0.25) for x in rng.choice(centres)]) for _ in range(150)]
    expected = brute_force_greedy(vectors, 0.95)
    got = PyDenseLeaderIndex(threshold=0.95).assign(vectors)
    assert [a.leader for a in got] == [e[0] for e in expected]
    assert len({a.leader for a in got}) < 150  # the data has near-duplicates


def test_dense_helper_accepts_floats() -> None:
    assert list(dense([1.0, 2.0])) == [1.0, 2.0]
