"""NumpyLeaderIndex: the exact path equals the one-at-a-time rule; the inverted file agrees with it."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from agent_fleet.aggregate.dense_index import NumpyLeaderIndex  # noqa: E402


def planted(n: int, dim: int = 64, *, seed: int = 0, dup_share: float = 0.5) -> np.ndarray:
    """Unit vectors where about ``dup_share`` are noisy copies of earlier ones (cosine ~0.9-0.99)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    for i in range(1, n):
        if rng.random() < dup_share:
            j = int(rng.integers(0, i))
            noise = rng.uniform(0.05, 0.35)
            x[i] = x[j] / np.linalg.norm(x[j]) + noise * rng.standard_normal(dim).astype(np.float32) / np.sqrt(dim)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def reference(x: np.ndarray, t: float) -> list[int]:
    leaders: list[int] = []
    out = []
    for i in range(len(x)):
        if leaders:
            sims = x[leaders] @ x[i]
            k = int(sims.argmax())
            if sims[k] >= t:
                out.append(leaders[k])
                continue
        leaders.append(i)
        out.append(i)
    return out


@pytest.mark.parametrize("batch", [1, 7, 5000])
def test_exact_path_equals_one_at_a_time(batch: int) -> None:
    x = planted(1500, seed=1)
    t = 0.95
    idx = NumpyLeaderIndex(threshold=t, ann="exact")
    got = []
    for start in range(0, len(x), batch):
        got.extend(a.leader for a in idx.assign(x[start : start + batch]))
    assert got == reference(x, t)
    assert len(idx) == len(set(got))
    assert 0 < len(idx) < len(x)


def test_members_are_within_threshold_of_their_leader() -> None:
    x = planted(800, seed=2)
    assigned = NumpyLeaderIndex(threshold=0.95, ann="exact").assign(x)
    for i, a in enumerate(assigned):
        assert float(x[i] @ x[a.leader]) >= 0.95 - 1e-6
        assert a.similarity == pytest.approx(float(x[i] @ x[a.leader]), abs=1e-5)


@pytest.mark.parametrize("ann", ["ivf", "faiss"])
def test_ann_paths_agree_with_exact_decisions(ann: str) -> None:
    x = planted(6000, seed=3, dup_share=0.4)
    t = 0.95
    exact = reference(x, t)
    idx = NumpyLeaderIndex(threshold=t, exact_limit=500, ann=ann, nprobe=8)
    got = [a.leader for a in idx.assign(x)]
    assert idx.uses_ann
    kept_exact = [e == i for i, e in enumerate(exact)]
    kept_got = [g == i for i, g in enumerate(got)]
    same = sum(a == b for a, b in zip(kept_exact, kept_got, strict=True)) / len(x)
    assert same >= 0.995
    # whatever the index found, a member is within the threshold of its leader
    for i, g in enumerate(got):
        assert float(x[i] @ x[g]) >= t - 1e-5


def test_the_probe_margin_comes_from_the_pairs_the_exact_search_found() -> None:
    # 64-d noise spreads a near-copy's home further across cell borders than 384-d noise does: the
    # measured margin follows the data, and a margin fixed too small misses more near-copies
    x = planted(6000, seed=3, dup_share=0.4)
    t = 0.95
    kept_exact = np.asarray(reference(x, t)) == np.arange(len(x))

    def agreement(margin: float | None) -> tuple[float, float]:
        idx = NumpyLeaderIndex(threshold=t, exact_limit=500, ann="ivf", margin=margin)
        kept = np.asarray([a.leader for a in idx.assign(x)]) == np.arange(len(x))
        assert idx._cells is not None
        return float((kept == kept_exact).mean()), idx._cells.margin

    measured, margin = agreement(None)
    narrow, _ = agreement(0.03)
    assert margin > 0.1
    assert measured >= 0.999 > narrow
