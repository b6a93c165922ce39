"""Balanced contiguous cuts: exact optimum of the largest part, non-empty parts, boundary preference."""

from __future__ import annotations

import random
from functools import cache
from itertools import pairwise

import pytest

from agent_fleet.decompose.cuts import balanced_cuts, min_max_load, prefix_sums
from agent_fleet.decompose.layout import common_directory, cut_costs


def brute_min_max(weights: list[int], parts: int) -> int:
    """The optimum by exhaustive dynamic programming (small inputs only)."""
    n = len(weights)
    prefix = prefix_sums(weights)

    @cache
    def best(start: int, k: int) -> int:
        if k == 1:
            return prefix[n] - prefix[start]
        return min(max(prefix[e] - prefix[start], best(e, k - 1)) for e in range(start + 1, n - k + 2))

    return best(0, parts)


def loads(prefix: list[int], cuts: list[int]) -> list[int]:
    return [prefix[b] - prefix[a] for a, b in pairwise(cuts)]


@pytest.mark.parametrize("seed", range(40))
def test_min_max_load_matches_exhaustive_optimum(seed: int) -> None:
    rng = random.Random(seed)
    weights = [rng.choice([1, 1, 2, 3, 5, 8, 40]) for _ in range(rng.randint(1, 14))]
    parts = rng.randint(1, len(weights))
    prefix = prefix_sums(weights)
    assert min_max_load(prefix, 0, len(weights), parts) == brute_min_max(weights, parts)


@pytest.mark.parametrize("seed", range(40))
def test_balanced_cuts_reach_the_optimum_with_exactly_n_nonempty_parts(seed: int) -> None:
    rng = random.Random(1000 + seed)
    weights = [rng.randint(1, 50) for _ in range(rng.randint(1, 14))]
    parts = rng.randint(1, len(weights) + 3)
    prefix = prefix_sums(weights)
    cuts = balanced_cuts(prefix, 0, len(weights), parts)
    assert cuts[0] == 0 and cuts[-1] == len(weights)
    assert len(cuts) - 1 == min(parts, len(weights))
    assert all(a < b for a, b in pairwise(cuts))  # contiguous, none empty
    assert max(loads(prefix, cuts)) == brute_min_max(weights, min(parts, len(weights)))


def test_cuts_spread_the_remainder_instead_of_leaving_the_last_parts_light() -> None:
    # Greedy packing would give 3,3,3,1; the optimum of 3 is also reached by 3,3,2,2 (or 2,3,2,3 …).
    prefix = prefix_sums([1] * 10)
    sizes = loads(prefix, balanced_cuts(prefix, 0, 10, 4))
    assert max(sizes) == 3 and min(sizes) == 2


def test_cuts_work_on_a_subrange() -> None:
    prefix = prefix_sums([5, 1, 1, 1, 1, 9])
    cuts = balanced_cuts(prefix, 1, 5, 2)
    assert cuts == [1, 3, 5]


def test_slack_lets_a_cut_move_to_a_cheap_boundary() -> None:
    # Ten items of weight 10; a cheap boundary sits before item 6 (the ideal cut is before item 5).
    prefix = prefix_sums([10] * 10)
    cost = [5] * 11
    cost[6] = 0
    assert balanced_cuts(prefix, 0, 10, 2) == [0, 5, 10]
    assert balanced_cuts(prefix, 0, 10, 2, cost=cost, slack=0.25) == [0, 6, 10]
    # Too far away for the slack: balance wins.
    cost = [5] * 11
    cost[8] = 0
    assert balanced_cuts(prefix, 0, 10, 2, cost=cost, slack=0.25) == [0, 5, 10]


@pytest.mark.parametrize("seed", range(20))
def test_slack_bounds_the_largest_part(seed: int) -> None:
    rng = random.Random(2000 + seed)
    n = rng.randint(2, 400)
    weights = [rng.randint(1, 100) for _ in range(n)]
    cost = [rng.randint(0, 4) for _ in range(n + 1)]
    parts = rng.randint(2, max(2, n // 3))
    prefix = prefix_sums(weights)
    best = min_max_load(prefix, 0, n, parts)
    cuts = balanced_cuts(prefix, 0, n, parts, cost=cost, slack=0.2)
    assert len(cuts) - 1 == parts
    assert max(loads(prefix, cuts)) <= int(best * 1.2)


def test_cut_costs_prefer_shallow_directory_boundaries() -> None:
    paths = ["README.md", "src/a/x.py", "src/a/y.py", "src/b/z.py", "tests/t.py"]
    costs = cut_costs(paths)
    assert costs[1] == 0  # root file | src/…
    assert costs[2] == 3  # inside src/a: the most expensive
    assert costs[3] == 1  # src/a | src/b share "src"
    assert costs[4] == 0  # src | tests


def test_common_directory_labels() -> None:
    assert common_directory("src/a/x.py", "src/a/sub/y.py") == "src/a"
    assert common_directory("src/a/x.py", "src/b/y.py") == "src"
    assert common_directory("README.md", "setup.py") == "."
    assert common_directory("docs/x.md", "src/y.py") == "docs … src"
    assert common_directory("README.md", "src/y.py") == ". … src"
