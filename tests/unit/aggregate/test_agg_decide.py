"""The batch rule (decide_batch) and the leader cells (BucketIVF) against one-at-a-time references."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from agent_fleet.aggregate.buckets import BucketIVF  # noqa: E402
from agent_fleet.aggregate.decide import decide_batch  # noqa: E402


def one_at_a_time(b: int, first: int, pi: list[int], pm: list[int], ps: list[float]) -> tuple[list[int], list[float]]:
    """The rule literally: in order, join the most similar earlier leader (ties: the earlier one)."""
    leaders: set[int] = set()
    lead, sims = [], []
    for i in range(b):
        best, best_sim = first + i, 1.0
        found = False
        for a, m, s in sorted(zip(pi, pm, ps, strict=True), key=lambda p: p[1]):
            if a == i and (m < first or m in leaders) and (not found or s > best_sim):
                best, best_sim, found = m, s, True
        if not found:
            leaders.add(first + i)
        lead.append(best)
        sims.append(best_sim)
    return lead, sims


def random_pairs(rng: np.random.Generator, b: int, first: int, k: int) -> tuple[np.ndarray, ...]:
    pi = rng.integers(1, b, k)
    local = rng.random(k) < 0.7
    pm = np.where(local, first + (rng.random(k) * pi).astype(np.int64), rng.integers(0, first, k))
    ps = rng.choice(np.array([0.95, 0.96, 0.97, 0.99], dtype=np.float32), k)
    return pi.astype(np.int64), pm.astype(np.int64), ps


@pytest.mark.parametrize("max_rounds", [0, 1, 32])
@pytest.mark.parametrize("seed", range(6))
def test_batch_rule_equals_one_at_a_time(seed: int, max_rounds: int) -> None:
    rng = np.random.default_rng(seed)
    b, first = 60, 1000
    pi, pm, ps = random_pairs(rng, b, first, 90)
    leader, sim = decide_batch(b, first, pi, pm, ps, max_rounds=max_rounds)
    want_leader, want_sim = one_at_a_time(b, first, pi.tolist(), pm.tolist(), ps.tolist())
    assert leader.tolist() == want_leader
    assert sim.tolist() == pytest.approx(want_sim)


def test_a_chain_longer_than_the_rounds_alternates() -> None:
    # each vector pairs with the one before: leader, joins, leader, joins, ...
    b = 50
    pi = np.arange(1, b, dtype=np.int64)
    pm = pi - 1
    ps = np.full(b - 1, 0.97, dtype=np.float32)
    for rounds in (2, 100):
        leader, _ = decide_batch(b, 0, pi, pm, ps, max_rounds=rounds)
        assert leader.tolist() == [i if i % 2 == 0 else i - 1 for i in range(b)]


def test_a_tie_goes_to_the_earlier_leader() -> None:
    # vector 1 of the batch: an old leader (seq 3) and batch vector 0 (seq 10), same similarity
    leader, sim = decide_batch(2, 10, np.array([1, 1]), np.array([10, 3]), np.array([0.96, 0.96], dtype=np.float32))
    assert leader.tolist() == [10, 3]
    assert sim.tolist() == pytest.approx([1.0, 0.96])


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_one_cell_finds_every_pair_and_keeps_only_leaders() -> None:
    rng = np.random.default_rng(0)
    old = unit(rng, 40, 16)
    cells = BucketIVF.flat(16)
    cells.search(old, np.arange(40), 2.0)  # nothing reaches 2: all lead
    cells.settle(0, np.ones(40, dtype=bool))
    q = np.vstack([old[:5] + 0.01 * unit(rng, 5, 16), unit(rng, 10, 16)])
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    seqs = np.arange(40, 55)
    pi, pm, ps = cells.search(q, seqs, 0.5)
    allx = np.vstack([old, q])
    want = {(i, m) for i in range(15) for m in range(40 + i) if float(allx[40 + i] @ allx[m]) >= 0.5}
    assert {(int(i), int(m)) for i, m in zip(pi, pm, strict=True)} == want
    assert np.allclose(ps, [allx[40 + i] @ allx[m] for i, m in zip(pi, pm, strict=True)], atol=1e-5)
    leads = np.zeros(15, dtype=bool)
    leads[[5, 9]] = True
    cells.settle(40, leads)
    rows, got = cells.leaders()
    assert got.tolist() == [*range(40), 45, 49]
    assert np.array_equal(rows[-2:], q[[5, 9]])
    assert len(cells) == 42


def test_the_probe_margin_is_measured_on_the_pairs_given() -> None:
    rng = np.random.default_rng(1)
    leaders = unit(rng, 2000, 32)
    x = unit(rng, 100, 32)
    y = x + 0.2 * unit(rng, 100, 32)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    cells = BucketIVF(leaders, np.arange(2000), nprobe=8, sample=(x, y))
    assert cells.centroids is not None
    px, py = x @ cells.centroids.T, y @ cells.centroids.T
    at = np.arange(100)
    gaps = np.concatenate([px.max(1) - px[at, py.argmax(1)], py.max(1) - py[at, px.argmax(1)]])
    assert gaps.max() > 0
    assert cells.margin == pytest.approx(1.25 * float(gaps.max()))
    too_few = BucketIVF(leaders, np.arange(2000), nprobe=8, sample=(x[:5], y[:5]))
    assert too_few.margin == 0.1


def test_a_query_probes_its_home_and_the_cells_within_the_margin_at_most_nprobe() -> None:
    rng = np.random.default_rng(2)
    leaders = unit(rng, 900, 24)
    q = unit(rng, 300, 24)
    for margin, nprobe in ((0.0, 8), (0.05, 8), (0.3, 3)):
        cells = BucketIVF(leaders, np.arange(900), nprobe=nprobe, margin=margin)
        assert cells.centroids is not None
        cell, query, home = cells.probe(q)
        p = q @ cells.centroids.T
        assert home.tolist() == p.argmax(axis=1).tolist()
        for i in range(len(q)):
            got = set(cell[query == i].tolist())
            near = set(np.flatnonzero(p[i] >= p[i].max() - np.float32(margin)).tolist())
            assert int(home[i]) in got
            assert got == near if len(near) <= nprobe else (len(got) == nprobe and got <= near)


def test_a_large_batch_probed_in_slices_on_every_cpu_probes_as_one() -> None:
    rng = np.random.default_rng(3)
    cells = BucketIVF(unit(rng, 3000, 24), np.arange(3000), nprobe=4, margin=0.08)
    q = unit(rng, 1501, 24)
    whole = cells.probe(q)
    spread = cells._probe_spread(q)
    for a, b in zip(whole, spread, strict=True):
        assert a.tolist() == b.tolist()
