"""Greedy leader clustering over an index of the kept leaders.

The rule (the same for every index): vectors are taken in the order given; a vector whose best
similarity to an earlier *leader* reaches the threshold joins that leader, otherwise it becomes a
leader itself. Only leaders are ever compared against, so there is no transitive chaining: every
member of a cluster is within the threshold of its leader, and when the order is "best first" the
leader is the best member by construction.

Indexes differ only in how they find the best leader:

* :class:`SparseLeaderIndex` — pure Python, for sparse (lexical) vectors; an inverted index over a
  *prefix* of each leader's features that provably contains every leader that can reach the
  threshold (All-Pairs prefix filtering), then exact scoring. No candidate is ever missed.
* :class:`PyDenseLeaderIndex` — pure Python brute force for dense vectors without numpy; small runs.
* :class:`~agent_fleet.aggregate.dense_index.NumpyLeaderIndex` — exact blocked matrix products while
  leaders are few, a faiss IVF index (candidates scored exactly) when they are many.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, repeat, takewhile
from operator import mul, neg, sub
from typing import Protocol

from agent_fleet.aggregate.vectors import SparseVector, Vector, dot

__all__ = ["Assignment", "LeaderIndex", "PyDenseLeaderIndex", "SparseLeaderIndex", "make_index"]

_ANGLE_MARGIN = 1e-6  # radians; far above the rounding of a dot product of unit vectors seen through acos
_SIM_MARGIN = 1e-9
_PAIR_CACHE_LIMIT = 1 << 18  # leader pairs remembered for the angle bound (some tens of MB at most)


@dataclass(frozen=True, slots=True)
class Assignment:
    """``leader`` is the sequence number (0-based, in assignment order) of the vector that leads;
    a new leader leads itself with similarity 1.0."""

    leader: int
    similarity: float


class LeaderIndex(Protocol):
    threshold: float

    def assign(self, vectors: Sequence[Vector]) -> list[Assignment]:
        """Assign the next vectors in order; new leaders are added before the next vector is assigned."""
        ...

    def __len__(self) -> int:
        """Number of leaders."""
        ...


class SparseLeaderIndex:
    """Exact greedy leader assignment for sparse unit vectors, in pure Python.

    Candidate generation: for a leader ``x`` the index holds a feature subset ``P`` (its prefix)
    such that the rest of ``x`` has norm below the threshold ``t``. A query ``y`` that shares no
    feature with ``P`` has ``x·y = (x without P)·y <= |x without P| < t`` (Cauchy-Schwarz), so every
    leader that can reach ``t`` shares a prefix feature with ``y``. The prefix takes a leader's
    rarest features first (by how many leaders hold them), which keeps posting lists short.
    """

    def __init__(self, *, threshold: float) -> None:
        self.threshold = threshold
        self._postings: defaultdict[int, list[int]] = defaultdict(list)
        self._df: Counter[int] = Counter()
        self._leaders: list[SparseVector] = []
        self._indexed = 0  # leaders before this position are in the postings; the rest wait for a query
        self._leader_seq: list[int] = []
        self._angles: dict[int, dict[int, float]] = {}  # leader -> leader -> angle between them (both ways)
        self._pairs = 0  # leader pairs in _angles
        self._seq = 0

    def __len__(self) -> int:
        return len(self._leaders)

    def _best(self, y: SparseVector) -> tuple[int, float]:
        if not self._leaders:
            return -1, -math.inf
        if self._indexed < len(self._leaders):
            self._index_waiting()
        postings = self._postings
        # how many indexed features each leader shares with y, counted in C
        hits = Counter(chain.from_iterable(map(postings.get, y, repeat(()))))
        best, best_sim, best_angle, reach = -1, -math.inf, 0.0, math.pi
        leaders, threshold = self._leaders, self.threshold
        row: dict[int, float] = {}
        # The leader sharing the most indexed features is scored first: it is usually the best, and
        # a good first score lets the angle bound below skip the others.
        for _, leader in sorted(zip(map(neg, hits.values()), hits, strict=True)):
            if best >= 0:
                # Angular distance is a metric, so angle(y, leader) >= angle(best, leader) - angle(y, best).
                # Leaders are at least the threshold's angle apart, which makes the bound bite. The
                # margins cover rounding in the dot products, acos and cos; a skipped leader's exact
                # similarity is below both the best so far and the threshold (its angle to y is
                # beyond ``reach``), so it can neither win nor tie.
                angle = row.get(leader)
                if angle is None:
                    angle = self._pair_angle(best, leader)
                if angle is not None and angle - best_angle - _ANGLE_MARGIN > reach:
                    continue
            sim = dot(y, leaders[leader])
            if sim > best_sim or (sim == best_sim and leader < best):
                best, best_sim = leader, sim
                best_angle = math.acos(max(-1.0, min(1.0, sim)))
                reach = math.acos(max(-1.0, min(1.0, max(sim, threshold) - _SIM_MARGIN)))
                row = self._angles.setdefault(best, {})
        return best, best_sim

    def _pair_angle(self, a: int, b: int) -> float | None:
        """The angle between leaders ``a`` and ``b``, remembered both ways; None once the memory is full."""
        if self._pairs >= _PAIR_CACHE_LIMIT:
            return None  # computing it would cost as much as scoring the candidate directly
        lo, hi = (a, b) if a < b else (b, a)
        angle = math.acos(max(-1.0, min(1.0, dot(self._leaders[lo], self._leaders[hi]))))
        self._angles.setdefault(a, {})[b] = angle
        self._angles.setdefault(b, {})[a] = angle
        self._pairs += 1
        return angle

    def _add(self, x: SparseVector) -> None:
        # Filed in the postings only once a query comes (:meth:`_index_waiting`): a leader no query
        # ever meets — the only result of its scope, say — costs nothing more.
        self._leaders.append(x)
        self._leader_seq.append(self._seq)

    def _index_waiting(self) -> None:
        """File the leaders added since the last query, in order: each one's prefix is chosen with
        the document frequencies of the leaders up to it, as if it had been filed when added."""
        limit = self.threshold * self.threshold
        df, postings = self._df, self._postings
        for pos in range(self._indexed, len(self._leaders)):
            x = self._leaders[pos]
            df.update(x.keys())
            # rarest features first (ties by feature), with what is left of the norm before each
            order = [f for _, f in sorted(zip(map(df.__getitem__, x), x, strict=True))]
            weights = list(map(x.__getitem__, order))
            squares = map(mul, weights, weights)
            left = accumulate(squares, sub, initial=math.fsum(map(mul, weights, weights)))
            # Index rarest features until what is left cannot reach the threshold on its own.
            for feature, _ in zip(order, takewhile(limit.__le__, left), strict=False):
                postings[feature].append(pos)
        self._indexed = len(self._leaders)

    def assign(self, vectors: Sequence[Vector]) -> list[Assignment]:
        out = []
        for v in vectors:
            if not isinstance(v, dict):
                raise TypeError("SparseLeaderIndex takes sparse vectors")
            best, sim = self._best(v)
            if best >= 0 and sim >= self.threshold:
                out.append(Assignment(self._leader_seq[best], sim))
            else:
                self._add(v)
                out.append(Assignment(self._seq, 1.0))
            self._seq += 1
        return out


class PyDenseLeaderIndex:
    """Brute force over the leaders, pure Python; for dense vectors when numpy is not installed."""

    def __init__(self, *, threshold: float) -> None:
        self.threshold = threshold
        self._leaders: list[Vector] = []
        self._leader_seq: list[int] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._leaders)

    def assign(self, vectors: Sequence[Vector]) -> list[Assignment]:
        out = []
        for v in vectors:
            best, best_sim = -1, -math.inf
            for pos, leader in enumerate(self._leaders):
                sim = dot(v, leader)
                if sim > best_sim:
                    best, best_sim = pos, sim
            if best >= 0 and best_sim >= self.threshold:
                out.append(Assignment(self._leader_seq[best], best_sim))
            else:
                self._leaders.append(v)
                self._leader_seq.append(self._seq)
                out.append(Assignment(self._seq, 1.0))
            self._seq += 1
        return out


def make_index(kind: str, *, threshold: float, exact_limit: int = 4096, ann: str = "auto") -> LeaderIndex:
    """The best index available for a vector kind: numpy/faiss for dense vectors when installed."""
    if kind == "sparse":
        return SparseLeaderIndex(threshold=threshold)
    try:
        from agent_fleet.aggregate.dense_index import NumpyLeaderIndex
    except ImportError:
        return PyDenseLeaderIndex(threshold=threshold)
    return NumpyLeaderIndex(threshold=threshold, exact_limit=exact_limit, ann=ann)
