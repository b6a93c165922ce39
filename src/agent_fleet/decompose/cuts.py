"""Contiguous balanced cuts of a weighted sequence (the linear partition problem).

Items keep their order; a cut list ``[a = c0 < c1 < … < ck = b]`` makes parts ``[c_i, c_i+1)``, none empty.
Weights are estimated tokens, given as prefix sums so any range's weight is one subtraction.

The largest part is minimised exactly (binary search on the load L with a greedy feasibility check that jumps
by bisection, O(k log n) per probe). Among the many cut lists that reach that optimum, one close to the
ideal (equal shares) is chosen, so the last parts are not left light. With a cut ``cost`` (lower is better, e.g.
a shallow directory boundary) and a ``slack``, the largest part may grow to ``(1 + slack)`` times the optimum to
let cuts land on cheap boundaries near the ideal positions.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate

__all__ = ["balanced_cuts", "min_max_load", "prefix_sums"]


def prefix_sums(weights: Sequence[int]) -> list[int]:
    """``p[i]`` is the weight of the first ``i`` items."""
    return [0, *accumulate(weights)]


def min_max_load(prefix: Sequence[int], a: int, b: int, parts: int) -> int:
    """The smallest L such that items ``[a, b)`` split into at most ``parts`` contiguous parts of weight ≤ L."""
    total = prefix[b] - prefix[a]
    lo, hi = -(-total // parts), total  # lo may be infeasible, hi (one part) never is
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(prefix, a, b, parts, mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def balanced_cuts(
    prefix: Sequence[int],
    a: int,
    b: int,
    parts: int,
    *,
    cost: Sequence[int] | None = None,
    slack: float = 0.0,
) -> list[int]:
    """Cut items ``[a, b)`` into ``min(parts, b - a)`` non-empty contiguous parts.

    The largest part weighs at most ``max(best, floor(best * (1 + slack)))`` where ``best`` is the optimum
    (``slack`` applies only when ``cost`` is given). ``cost[i]`` prices a cut just before item ``i``; among the
    admissible cuts within ``slack`` of the ideal position, the cheapest wins, then the nearest to the ideal.
    """
    parts = min(parts, b - a)
    if parts <= 1:
        return [a, b]
    best = min_max_load(prefix, a, b, parts)
    load = max(best, int(best * (1 + slack))) if cost is not None else best
    # earliest[m]: the leftmost start from which m parts of weight ≤ load can cover the rest up to b.
    # Packing from the right greedily is optimal for that, and each part takes at least one item.
    earliest = [b] * parts
    for m in range(1, parts):
        prev = earliest[m - 1]
        earliest[m] = bisect_left(prefix, prefix[prev] - load, a, prev)
    band = slack * (prefix[b] - prefix[a]) / parts
    cuts = [a]
    s = a
    for j in range(parts - 1):
        m = parts - 1 - j  # parts still to come after this one
        # A cut e is admissible when this part fits (e ≤ latest), the rest fits in m parts (e ≥ earliest[m])
        # and every part keeps an item. The interval is never empty while a solution with load exists.
        lo_e = max(s + 1, earliest[m])
        hi_e = min(bisect_right(prefix, prefix[s] + load, s + 1, b + 1) - 1, b - m)
        hi_e = max(hi_e, lo_e)
        target = prefix[s] + (prefix[b] - prefix[s]) / (m + 1)
        e = _nearest(prefix, target, lo_e, hi_e)
        if cost is not None and band > 0:
            first = bisect_left(prefix, target - band, lo_e, hi_e + 1)
            last = bisect_right(prefix, target + band, lo_e, hi_e + 1) - 1
            if first <= last:
                e = min(range(first, last + 1), key=lambda i: (cost[i], abs(prefix[i] - target), i))
        cuts.append(e)
        s = e
    cuts.append(b)
    return cuts


def _fits(prefix: Sequence[int], a: int, b: int, parts: int, load: int) -> bool:
    s, used = a, 0
    while s < b:
        used += 1
        if used > parts:
            return False
        e = bisect_right(prefix, prefix[s] + load, s + 1, b + 1) - 1
        if e == s:  # one item alone is heavier than load
            return False
        s = e
    return True


def _nearest(prefix: Sequence[int], target: float, lo: int, hi: int) -> int:
    """The index in ``[lo, hi]`` whose prefix is nearest ``target`` (the lower one on a tie)."""
    i = bisect_left(prefix, target, lo, hi + 1)
    if i > hi:
        return hi
    if i > lo and target - prefix[i - 1] <= prefix[i] - target:
        return i - 1
    return i
