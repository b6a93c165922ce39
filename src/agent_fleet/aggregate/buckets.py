"""An inverted-file index over the leaders whose lists are scanned with matrix products.

The lists are cells around ``nlist`` centroids drawn at random from the leaders (no k-means: for
near-duplicates at cosine >= 0.95 a vector and its near-copy fall in the same or neighbouring cells
whatever the cells are, and drawing costs nothing). A query probes its ``nprobe`` most similar
cells. Leaders are stored contiguously per cell, so a batch of queries is scored against a cell by
one matrix product (BLAS), and every score is an exact inner product: a candidate is never accepted
on an approximate score, only a leader in an unprobed cell can be missed.

Measured here on two cores, faiss's ``IndexIVFFlat`` scans its lists one query at a time at about
8 GFLOP/s while the products run at about 44 GFLOP/s, which is why this index exists beside it
(benchmarks/dedup.py compares both).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["BucketIVF"]


class BucketIVF:
    def __init__(self, leaders: np.ndarray, positions: np.ndarray, *, nprobe: int, seed: int = 0) -> None:
        n, d = leaders.shape
        self.nlist = max(16, min(n, int(2 * math.sqrt(n))))
        # More, smaller cells as the leaders grow: probe a fixed share of them (1/64) so the chance
        # that a near-copy sits in an unprobed neighbour does not grow with the run.
        self.nprobe = min(max(nprobe, self.nlist // 64), self.nlist)
        rng = np.random.default_rng(seed)
        self.centroids = np.ascontiguousarray(leaders[np.sort(rng.choice(n, self.nlist, replace=False))])
        self._mats: list[np.ndarray] = [np.empty((0, d), dtype=np.float32) for _ in range(self.nlist)]
        self._pos: list[np.ndarray] = [np.empty(0, dtype=np.int64) for _ in range(self.nlist)]
        self._size = np.zeros(self.nlist, dtype=np.int64)
        self.add(leaders, positions, self.home(leaders))

    def __len__(self) -> int:
        return int(self._size.sum())

    def home(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(len(x), dtype=np.int64)
        for s in range(0, len(x), 8192):
            out[s : s + 8192] = (x[s : s + 8192] @ self.centroids.T).argmax(axis=1)
        return out

    def probe(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The cells each query probes (B x nprobe) and its home cell (the most similar centroid)."""
        p = q @ self.centroids.T
        home = p.argmax(axis=1)
        if self.nprobe >= self.nlist:
            return np.broadcast_to(np.arange(self.nlist), (len(q), self.nlist)), home
        return np.argpartition(-p, self.nprobe - 1, axis=1)[:, : self.nprobe], home

    def add(self, rows: np.ndarray, positions: np.ndarray, home: np.ndarray) -> None:
        order = np.argsort(home, kind="stable")
        cells, starts = np.unique(home[order], return_index=True)
        ends = np.append(starts[1:], len(order))
        for cell, a, b in zip(cells.tolist(), starts.tolist(), ends.tolist(), strict=True):
            idx = order[a:b]
            size, need = int(self._size[cell]), int(self._size[cell]) + len(idx)
            if need > len(self._pos[cell]):
                cap = max(need, 2 * len(self._pos[cell]), 16)
                mat = np.empty((cap, rows.shape[1]), dtype=np.float32)
                mat[:size] = self._mats[cell][:size]
                pos = np.empty(cap, dtype=np.int64)
                pos[:size] = self._pos[cell][:size]
                self._mats[cell], self._pos[cell] = mat, pos
            self._mats[cell][size:need] = rows[idx]
            self._pos[cell][size:need] = positions[idx]
            self._size[cell] = need

    def scan(
        self, q: np.ndarray, probes: np.ndarray, home: np.ndarray, threshold: float
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Best stored leader (position, similarity) per query among its probed cells, and the
        in-batch pairs ``(i, j, sim)`` with ``j < i``, ``j`` homed in a cell ``i`` probes and
        ``sim >= threshold`` — the pairs the index would have found had ``j`` been stored first."""
        b = len(q)
        best = np.full(b, -1, dtype=np.int64)
        best_sim = np.full(b, -np.inf, dtype=np.float32)
        flat = probes.ravel()
        qidx = np.repeat(np.arange(b), probes.shape[1])
        order = np.argsort(flat, kind="stable")
        cells, starts = np.unique(flat[order], return_index=True)
        ends = np.append(starts[1:], len(order))
        h_order = np.argsort(home, kind="stable")
        h_cells, h_starts = np.unique(home[h_order], return_index=True)
        h_ends = np.append(h_starts[1:], len(h_order))
        homed = {c: h_order[a:e] for c, a, e in zip(h_cells.tolist(), h_starts.tolist(), h_ends.tolist(), strict=True)}
        pi: list[np.ndarray] = []
        pj: list[np.ndarray] = []
        ps: list[np.ndarray] = []
        for cell, a, e in zip(cells.tolist(), starts.tolist(), ends.tolist(), strict=True):
            qs = qidx[order[a:e]]
            qm = q[qs]
            size = int(self._size[cell])
            if size:
                sims = qm @ self._mats[cell][:size].T
                arg = sims.argmax(axis=1)
                val = sims[np.arange(len(qs)), arg]
                better = val > best_sim[qs]
                best_sim[qs[better]] = val[better]
                best[qs[better]] = self._pos[cell][arg[better]]
            hs = homed.get(cell)
            if hs is not None:
                s2 = qm @ q[hs].T
                ii, jj = np.nonzero((s2 >= threshold) & (hs[None, :] < qs[:, None]))
                if len(ii):
                    pi.append(qs[ii])
                    pj.append(hs[jj])
                    ps.append(s2[ii, jj])
        empty_i = np.empty(0, dtype=np.int64)
        pairs = (
            np.concatenate(pi) if pi else empty_i,
            np.concatenate(pj) if pj else empty_i,
            np.concatenate(ps) if ps else np.empty(0, dtype=np.float32),
        )
        return best, best_sim, pairs
