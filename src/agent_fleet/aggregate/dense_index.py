"""Greedy leader assignment for dense unit vectors with numpy, and faiss when leaders are many.

Per batch of queries (in order):

1. best earlier leader of every query: exact blocked matrix products against the leader matrix
   while there are at most ``exact_limit`` leaders; above that, a faiss ``IndexIVFFlat`` over the
   leaders only (inner product; the scores it returns for the probed lists are exact products);
2. the queries among themselves: one ``B x B`` product, then a sequential pass, so a query can
   join a leader that appeared earlier in the same batch — exactly the one-at-a-time rule.

The IVF index is trained on the leaders present when it is built and rebuilt when the leaders
have grown fourfold, so its lists stay short as the run grows. IVF can miss a leader that sits in
a list it did not probe; ``nprobe`` trades that against time (benchmarks/dedup.py measures the
share of decisions identical to the exact computation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

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
    def __init__(self, *, threshold: float, exact_limit: int = 4096, ann: str = "auto", nprobe: int = 16) -> None:
        if ann not in ("auto", "exact", "faiss"):
            raise ValueError(f"unknown index {ann!r}")
        self.threshold = threshold
        self.exact_limit = exact_limit
        self.nprobe = nprobe
        self._faiss: Any = None
        if ann != "exact":
            try:
                import faiss

                self._faiss = faiss
            except ImportError:
                if ann == "faiss":
                    raise
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._leader_seq = np.zeros(0, dtype=np.int64)
        self._seq = 0
        self._ivf: Any = None
        self._ivf_trained_at = 0

    def __len__(self) -> int:
        return self._n

    @property
    def uses_ann(self) -> bool:
        return self._ivf is not None

    def _grow(self, rows: np.ndarray) -> None:
        need = self._n + len(rows)
        if self._mat.shape[0] < need or self._mat.shape[1] != rows.shape[1]:
            cap = max(need, 2 * self._mat.shape[0], 1024)
            mat = np.zeros((cap, rows.shape[1]), dtype=np.float32)
            if self._n:
                mat[: self._n] = self._mat[: self._n]
            self._mat = mat
            seq = np.zeros(cap, dtype=np.int64)
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

    def _build_ivf(self) -> None:
        faiss = self._faiss
        n, d = self._n, self._mat.shape[1]
        nlist = int(min(max(64, 4 * math.sqrt(n)), n // 39))
        quantizer = faiss.IndexFlatIP(d)
        ivf = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = self._mat[:n]
        if n > 256 * nlist:  # k-means needs no more than this; keep training cheap
            rng = np.random.default_rng(0)
            sample = sample[np.sort(rng.choice(n, 256 * nlist, replace=False))]
        ivf.train(np.ascontiguousarray(sample))
        ivf.add(self._mat[:n])
        ivf.nprobe = min(self.nprobe, nlist)
        self._ivf = ivf
        self._ivf_trained_at = n

    def _best(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._n == 0:
            return np.full(len(q), -1, dtype=np.int64), np.full(len(q), -np.inf, dtype=np.float32)
        if self._faiss is None or self._n <= self.exact_limit:
            return self._exact_best(q)
        if self._ivf is None or self._n >= 4 * self._ivf_trained_at:
            self._build_ivf()
        dist, ids = self._ivf.search(q, 1)
        best = ids[:, 0].astype(np.int64)
        best_sim = np.where(best >= 0, dist[:, 0], -np.inf).astype(np.float32)
        return best, best_sim

    def assign(self, vectors: Sequence[Vector] | np.ndarray) -> list[Assignment]:
        q = as_matrix(vectors)
        if len(q) == 0:
            return []
        out: list[Assignment] = []
        # Batches bound the B x B in-batch product.
        for start in range(0, len(q), 2048):
            out.extend(self._assign_batch(q[start : start + 2048]))
        return out

    def _assign_batch(self, q: np.ndarray) -> list[Assignment]:
        t = self.threshold
        old, old_sim = self._best(q)
        old_seq = self._leader_seq[np.maximum(old, 0)].tolist() if self._n else [-1] * len(q)
        old_sims = old_sim.tolist()
        inner = q @ q.T
        # Only a query with some earlier in-batch vector at the threshold can join an in-batch leader.
        near_earlier = (np.tril(inner, -1).max(axis=1) >= t).tolist() if t > 0 else [True] * len(q)
        b = len(q)
        is_new = np.zeros(b, dtype=bool)
        out: list[Assignment] = []
        new_rows: list[int] = []
        for i in range(b):
            s_old = old_sims[i]
            j, s_new = -1, -math.inf
            if new_rows and near_earlier[i]:
                row = np.where(is_new[:i], inner[i, :i], -np.inf)
                j = int(row.argmax())
                s_new = float(row[j])
            if s_old >= t or s_new >= t:
                if s_new > s_old:
                    out.append(Assignment(self._seq + j - i, s_new))
                else:
                    out.append(Assignment(int(old_seq[i]), s_old))
            else:
                is_new[i] = True
                new_rows.append(i)
                out.append(Assignment(self._seq, 1.0))
            self._seq += 1
        if new_rows:
            rows = q[new_rows]
            self._grow(rows)
            self._mat[self._n : self._n + len(rows)] = rows
            first_seq = self._seq - b
            self._leader_seq[self._n : self._n + len(rows)] = [first_seq + r for r in new_rows]
            self._n += len(rows)
            if self._ivf is not None:
                self._ivf.add(rows)
        return out
