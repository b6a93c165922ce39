"""Greedy leader assignment for dense unit vectors with numpy.

Per batch of queries (in order):

1. the best earlier leader of every query: exact blocked matrix products against all leaders while
   there are at most ``exact_limit`` of them; above that an inverted file over the leaders only —
   :class:`~agent_fleet.aggregate.buckets.BucketIVF` (numpy, the default) or faiss ``IndexIVFFlat``
   (``ann="faiss"``). Both score candidates by exact inner products; they can only miss a leader
   in a cell they did not probe;
2. the queries among themselves: the pairs at the threshold within the batch (all of them in
   exact mode; those an inverted file would have found in IVF mode), then a sequential pass over
   the queries that have such a pair, so a query can join a leader made earlier in the same batch —
   the one-at-a-time rule.

The inverted file is rebuilt (new cells) when the leaders have grown fourfold, so its cells stay
small as the run grows. ``nprobe`` trades misses against time; benchmarks/dedup.py measures the
share of decisions identical to the exact computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agent_fleet.aggregate.buckets import BucketIVF
from agent_fleet.aggregate.index import Assignment
from agent_fleet.aggregate.vectors import Vector

__all__ = ["NumpyLeaderIndex", "as_matrix"]

_BLOCK = 16384  # leader rows per product block: bounds the temporary (batch x block) matrix


def as_matrix(vectors: Sequence[Vector] | np.ndarray) -> np.ndarray:
    if isinstance(vectors, np.ndarray):
        return np.ascontiguousarray(vectors, dtype=np.float32)
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    rows = []
    for v in vectors:
        if isinstance(v, dict):
            raise TypeError("NumpyLeaderIndex takes dense vectors")
        rows.append(np.frombuffer(v, dtype=np.float32))
    return np.vstack(rows)


class NumpyLeaderIndex:
    def __init__(self, *, threshold: float, exact_limit: int = 4096, ann: str = "auto", nprobe: int = 8) -> None:
        if ann not in ("auto", "exact", "ivf", "faiss"):
            raise ValueError(f"unknown index {ann!r}: use auto, exact, ivf or faiss")
        self.threshold = threshold
        self.exact_limit = exact_limit
        self.nprobe = nprobe
        self.mode = "ivf" if ann == "auto" else ann
        self._faiss: Any = None
        if self.mode == "faiss":
            import faiss

            self._faiss = faiss
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._leader_seq = np.zeros(0, dtype=np.int64)
        self._seq = 0
        self._buckets: BucketIVF | None = None
        self._ivf: Any = None
        self._built_at = 0

    def __len__(self) -> int:
        return self._n

    @property
    def uses_ann(self) -> bool:
        return self._buckets is not None or self._ivf is not None

    def _grow(self, rows: np.ndarray) -> None:
        need = self._n + len(rows)
        if self._mat.shape[0] < need or self._mat.shape[1] != rows.shape[1]:
            cap = max(need, 2 * self._mat.shape[0], 1024)
            mat = np.empty((cap, rows.shape[1]), dtype=np.float32)
            if self._n:
                mat[: self._n] = self._mat[: self._n]
            self._mat = mat
            seq = np.empty(cap, dtype=np.int64)
            seq[: self._n] = self._leader_seq[: self._n]
            self._leader_seq = seq

    def _exact_best(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        best = np.full(len(q), -1, dtype=np.int64)
        best_sim = np.full(len(q), -np.inf, dtype=np.float32)
        for start in range(0, self._n, _BLOCK):
            stop = min(self._n, start + _BLOCK)
            sims = q @ self._mat[start:stop].T
            arg = sims.argmax(axis=1)
            val = sims[np.arange(len(q)), arg]
            better = val > best_sim
            best[better] = arg[better] + start
            best_sim[better] = val[better]
        return best, best_sim

    def _build(self) -> None:
        n = self._n
        self._built_at = n
        if self.mode == "ivf":
            self._buckets = BucketIVF(self._mat[:n], np.arange(n), nprobe=self.nprobe)
            return
        faiss = self._faiss
        d = self._mat.shape[1]
        nlist = max(16, int(2 * np.sqrt(n)))
        quantizer = faiss.IndexFlatIP(d)
        rng = np.random.default_rng(0)
        # Cells around leaders drawn at random, as in BucketIVF: no k-means, nothing to train.
        quantizer.add(np.ascontiguousarray(self._mat[np.sort(rng.choice(n, nlist, replace=False))]))
        ivf = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.add(self._mat[:n])
        ivf.nprobe = min(self.nprobe, nlist)
        self._ivf = ivf

    def assign(self, vectors: Sequence[Vector] | np.ndarray) -> list[Assignment]:
        q = as_matrix(vectors)
        out: list[Assignment] = []
        start = 0
        while start < len(q):
            # The in-batch product is B x B in exact mode: keep those batches small.
            step = 4096 if self.uses_ann else 1024
            out.extend(self._assign_batch(q[start : start + step]))
            start += step
        return out

    def _candidates(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...], np.ndarray | None]:
        t = self.threshold
        if self.mode != "exact" and self._n > self.exact_limit and (not self.uses_ann or self._n >= 4 * self._built_at):
            self._build()
        if self._buckets is not None:
            probes, home = self._buckets.probe(q)
            best, best_sim, pairs = self._buckets.scan(q, probes, home, t)
            return best, best_sim, pairs, home
        if self._ivf is not None:
            dist, ids = self._ivf.search(q, 1)
            best = ids[:, 0].astype(np.int64)
            best_sim = np.where(best >= 0, dist[:, 0], -np.inf).astype(np.float32)
        elif self._n:
            best, best_sim = self._exact_best(q)
        else:
            best, best_sim = np.full(len(q), -1, dtype=np.int64), np.full(len(q), -np.inf, dtype=np.float32)
        inner = q @ q.T
        ii, jj = np.nonzero(np.tril(inner >= t, -1))
        return best, best_sim, (ii, jj, inner[ii, jj]), None

    def _assign_batch(self, q: np.ndarray) -> list[Assignment]:
        t = self.threshold
        b = len(q)
        old, old_sim, (pi, pj, ps), home = self._candidates(q)
        old_seq = self._leader_seq[np.maximum(old, 0)] if self._n else np.full(b, -1, dtype=np.int64)
        first_seq = self._seq
        hit = old_sim >= t
        leader = np.where(hit, old_seq, -1)
        sim = np.where(hit, old_sim, 1.0).astype(np.float64)
        # A query without an in-batch pair depends on the old leaders alone: decided for all at once.
        is_new = ~hit
        if len(pi):
            order = np.lexsort((pj, pi))
            pi, pj, ps = pi[order], pj[order], ps[order]
            items, starts = np.unique(pi, return_index=True)
            ends = np.append(starts[1:], len(pi))
            is_new[items] = False
            # In order: every decision before a query is final when it is taken (the one-at-a-time rule).
            for i, a, e in zip(items.tolist(), starts.tolist(), ends.tolist(), strict=True):
                js, ss = pj[a:e], ps[a:e]
                live = is_new[js]
                s_new = -np.inf
                if live.any():
                    k = int(ss[live].argmax())
                    s_new, j = float(ss[live][k]), int(js[live][k])
                if s_new >= t and s_new > old_sim[i]:
                    leader[i], sim[i] = first_seq + j, s_new
                elif not hit[i]:
                    is_new[i] = True
        new_rows = np.nonzero(is_new)[0]
        leader[new_rows] = first_seq + new_rows
        sim[new_rows] = 1.0
        self._seq += b
        if len(new_rows):
            rows = q[new_rows]
            positions = np.arange(self._n, self._n + len(rows))
            self._grow(rows)
            self._mat[self._n : self._n + len(rows)] = rows
            self._leader_seq[self._n : self._n + len(rows)] = first_seq + new_rows
            self._n += len(rows)
            if self._buckets is not None and home is not None:
                self._buckets.add(rows, positions, home[new_rows])
            elif self._ivf is not None:
                self._ivf.add(rows)
        return [Assignment(ld, sm) for ld, sm in zip(leader.tolist(), sim.tolist(), strict=True)]
