"""An inverted file over the leaders whose cells are scanned with matrix products.

The cells lie around ``nlist`` centroids drawn at random from the leaders (no k-means: for
near-duplicates at cosine >= 0.95 a vector and its near-copy fall in the same or neighbouring cells
whatever the cells are, and drawing costs nothing). A query probes its home cell (the most similar
centroid) and every other cell whose centroid is within ``margin`` of that similarity, at most
``nprobe`` cells: a query deep inside its cell probes one, a query on a border probes the cells
across it.

How far across a border a near-copy's home can lie depends on the data (on how many directions its
differences spread over), so the margin is measured, not guessed: given a sample of near-duplicate
pairs (those the exact search found before the inverted file was built), it is ``_MARGIN_SAFETY``
times the largest gap the sample shows between a vector's best centroid and its partner's home
centroid (at least ``_MARGIN_FLOOR``); ``_MARGIN_DEFAULT`` when the sample is too small to say.

Leaders are stored contiguously per cell, so the queries that probe a cell are scored against it by
one matrix product, and every score is an exact inner product: a pair is never accepted on an
approximate score; only a leader in an unprobed cell can be missed. With ``nlist=1`` there is one
cell that every query probes: the exact search.

A search first files the batch's own vectors in their home cells as *pending* members, so one
product per cell finds both the pairs with stored leaders and those with earlier vectors of the same
batch (a vector is paired only with members earlier than itself, by sequence number);
:meth:`BucketIVF.settle` then keeps the pending members that became leaders and drops the rest.

The products are small (a cell holds a few hundred leaders), and a multi-threaded BLAS spends more
on waking its threads than on such a product — fifty times more on a loaded two-core machine — so
the scan runs with BLAS held to one thread.
"""

from __future__ import annotations

import math

import numpy as np

from agent_fleet.aggregate.blas import cpu_count, run_spread

__all__ = ["BucketIVF"]

_TILE = 4096  # rows and columns per product tile: bounds the temporary score matrix (64 MB)
_SPREAD = 256  # queries from which a search spreads its cells over threads
_Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]
_MARGIN_SAFETY = 1.25
_MARGIN_DEFAULT = 0.1
_MARGIN_FLOOR = 0.02  # a sample whose pairs all share their home cell still probes across close borders
_MARGIN_SAMPLE = 32  # pairs needed to measure the margin


class BucketIVF:
    def __init__(
        self,
        leaders: np.ndarray,
        seqs: np.ndarray,
        *,
        nprobe: int,
        margin: float | None = None,
        sample: tuple[np.ndarray, np.ndarray] | None = None,
        nlist: int | None = None,
        room: int = 1,
    ) -> None:
        """``leaders`` in sequence order (``seqs`` ascending); ``margin`` None: measured on ``sample``
        (rows of near-duplicate pairs, the two sides); ``room``: each cell is made to hold that many
        times its first leaders before it has to be copied to grow (memory never written is never
        resident)."""
        n, d = leaders.shape
        self.dim = d
        self.nlist = max(1, min(n, nlist if nlist is not None else int(2 * math.sqrt(n))))
        self.nprobe = max(1, min(nprobe, self.nlist))
        self.centroids: np.ndarray | None = None
        if self.nlist > 1:
            rng = np.random.default_rng(0)
            self.centroids = np.ascontiguousarray(leaders[np.sort(rng.choice(n, self.nlist, replace=False))])
        self.margin = margin if margin is not None else self._measured_margin(sample)
        self._mats: list[np.ndarray] = [np.empty((0, d), dtype=np.float32) for _ in range(self.nlist)]
        self._seqs: list[np.ndarray] = [np.empty(0, dtype=np.int64) for _ in range(self.nlist)]
        self._size = np.zeros(self.nlist, dtype=np.int64)
        if n:
            starts = range(0, n, _TILE)
            homes = run_spread(lambda s: self.home(leaders[s : s + _TILE]), starts, name="cells")
            counts = np.bincount(np.concatenate(homes), minlength=self.nlist)
            for cell, count in enumerate(counts.tolist()):
                self._mats[cell] = np.empty((room * count + 16, d), dtype=np.float32)
                self._seqs[cell] = np.empty(room * count + 16, dtype=np.int64)
            for s, home in zip(starts, homes, strict=True):  # a tile at a time: no second copy of the leaders
                self._file(leaders[s : s + _TILE], seqs[s : s + _TILE], home)
        self._settled = self._size.copy()

    @classmethod
    def flat(cls, dim: int) -> BucketIVF:
        """One cell that every query probes: exact search."""
        return cls(np.empty((0, dim), dtype=np.float32), np.empty(0, dtype=np.int64), nprobe=1, margin=0.0, nlist=1)

    def __len__(self) -> int:
        return int(self._settled.sum())

    def _measured_margin(self, sample: tuple[np.ndarray, np.ndarray] | None) -> float:
        if self.centroids is None or sample is None or len(sample[0]) < _MARGIN_SAMPLE:
            return _MARGIN_DEFAULT
        px, py = sample[0] @ self.centroids.T, sample[1] @ self.centroids.T
        hx, hy = px.argmax(axis=1), py.argmax(axis=1)
        at = np.arange(len(px))
        # either side may come first: the query's best centroid against its partner's home, both ways
        gap = max(float((px[at, hx] - px[at, hy]).max()), float((py[at, hy] - py[at, hx]).max()))
        return max(_MARGIN_FLOOR, _MARGIN_SAFETY * gap)

    def rows(self, seqs: np.ndarray) -> np.ndarray:
        """The stored rows (pending ones too) of the given sequence numbers; one cell only."""
        if self.nlist != 1:
            raise ValueError("rows by sequence number are looked up in a one-cell index only")
        size = int(self._size[0])
        return self._mats[0][np.searchsorted(self._seqs[0][:size], seqs)]

    def home(self, x: np.ndarray) -> np.ndarray:
        """Each row's most similar centroid."""
        if self.centroids is None:
            return np.zeros(len(x), dtype=np.int64)
        return np.asarray((x @ self.centroids.T).argmax(axis=1), dtype=np.int64)

    def probe(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (cell, query) pairs to scan, by cell and then query, and each query's home cell."""
        b = len(q)
        if self.centroids is None:
            return np.zeros(b, dtype=np.int64), np.arange(b), np.zeros(b, dtype=np.int64)
        p = self.centroids @ q.T  # nlist x b: the pairs come out cell by cell
        best = p.max(axis=0)
        near = p >= best - np.float32(self.margin)
        crowded = np.flatnonzero(near.sum(axis=0) > self.nprobe)
        if len(crowded):  # on a crowded border: the nprobe nearest cells only
            top = np.argpartition(-p[:, crowded].T, self.nprobe - 1, axis=1)[:, : self.nprobe]
            near[:, crowded] = False
            near[top, crowded[:, None]] = True
        cell, query = np.divmod(np.flatnonzero(near), b)
        home = np.empty(b, dtype=np.int64)
        first = p[cell, query] == best[query]
        home[query[first][::-1]] = cell[first][::-1]  # the first best cell, as argmax picks
        return cell, query, home

    def _probe_spread(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`probe` over slices of a large batch on every CPU, merged back cell by cell."""
        if len(q) < 2 * _SPREAD or self.centroids is None:
            return self.probe(q)
        step = -(-len(q) // cpu_count())
        starts = range(0, len(q), step)
        parts = run_spread(lambda s: self.probe(q[s : s + step]), starts, name="cells")
        cell = np.concatenate([p[0] for p in parts])
        query = np.concatenate([p[1] + s for p, s in zip(parts, starts, strict=True)])
        order = np.argsort(cell, kind="stable")  # the slices are in order: queries stay ascending per cell
        return cell[order], query[order], np.concatenate([p[2] for p in parts])

    def leaders(self) -> tuple[np.ndarray, np.ndarray]:
        """Every settled member (rows, sequence numbers), in sequence order."""
        sizes = self._settled.tolist()
        seqs = np.concatenate([s[:k] for s, k in zip(self._seqs, sizes, strict=True)])
        rank = np.empty(len(seqs), dtype=np.int64)
        rank[np.argsort(seqs, kind="stable")] = np.arange(len(seqs))
        rows = np.empty((len(seqs), self.dim), dtype=np.float32)
        at = 0
        for mat, k in zip(self._mats, sizes, strict=True):
            rows[rank[at : at + k]] = mat[:k]
            at += k
        return rows, np.sort(seqs)

    def _file(self, rows: np.ndarray, seqs: np.ndarray, home: np.ndarray) -> None:
        if len(rows) == 1:  # a result streamed in alone
            groups = [(int(home[0]), 0, 1)]
        else:
            order = np.argsort(home, kind="stable")
            cells, starts = np.unique(home[order], return_index=True)
            ends = np.append(starts[1:], len(order))
            rows, seqs = rows[order], seqs[order]
            groups = list(zip(cells.tolist(), starts.tolist(), ends.tolist(), strict=True))
        for cell, a, b in groups:
            size = int(self._size[cell])
            need = size + b - a
            if need > len(self._seqs[cell]):
                cap = max(need, 2 * size, 16)
                mat = np.empty((cap, self.dim), dtype=np.float32)
                mat[:size] = self._mats[cell][:size]
                seq = np.empty(cap, dtype=np.int64)
                seq[:size] = self._seqs[cell][:size]
                self._mats[cell], self._seqs[cell] = mat, seq
            self._mats[cell][size:need] = rows[a:b]
            self._seqs[cell][size:need] = seqs[a:b]
            self._size[cell] = need

    def search(self, q: np.ndarray, seqs: np.ndarray, threshold: float) -> _Pairs:
        """Every pair ``(i, member, sim)`` with ``i`` a row of ``q``, ``member`` the sequence number
        of a stored leader or an earlier row of ``q`` in a cell ``i`` probes, and ``sim >= threshold``.
        The rows of ``q`` stay filed as pending members until :meth:`settle`."""
        cell, query, home = self._probe_spread(q)
        self._file(q, seqs, home)
        bounds = np.flatnonzero(np.diff(cell)) + 1
        starts = np.concatenate(([0], bounds)).tolist()
        ends = np.concatenate((bounds, [len(cell)])).tolist()
        groups = [(int(cell[a]), query[a:e]) for a, e in zip(starts, ends, strict=True)]

        def scan(group: tuple[int, np.ndarray]) -> list[_Pairs]:
            return self._scan(q, seqs, group[1], group[0], threshold)

        # a small batch (a result streamed in alone, say) is worth neither the threads nor the BLAS limit
        parts = run_spread(scan, groups, name="cells") if len(q) >= _SPREAD else [scan(g) for g in groups]
        found = [p for part in parts for p in part]
        if not found:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        pi, pm, ps = (np.concatenate(part) for part in zip(*found, strict=True))
        return pi, pm, ps

    def _scan(self, q: np.ndarray, seqs: np.ndarray, qs: np.ndarray, cell: int, threshold: float) -> list[_Pairs]:
        found: list[_Pairs] = []
        size = int(self._size[cell])
        mat, mseq = self._mats[cell], self._seqs[cell]
        for r in range(0, len(qs), _TILE):
            rows = qs[r : r + _TILE]
            qm = q[rows]
            qseq = seqs[rows]
            for c in range(0, size, _TILE):
                stop = min(size, c + _TILE)
                if int(mseq[c]) >= int(qseq[-1]):
                    break  # members are filed in sequence order: none is earlier than any query here
                sims = qm @ mat[c:stop].T
                hit = np.flatnonzero(sims >= threshold)
                if not len(hit):
                    continue
                ii, jj = np.divmod(hit, stop - c)
                ms = mseq[c + jj]
                earlier = ms < qseq[ii]
                ii, jj = ii[earlier], jj[earlier]
                found.append((rows[ii], ms[earlier], sims[ii, jj]))
        return found

    def settle(self, first_seq: int, leads: np.ndarray) -> None:
        """Keep the pending members that lead (``leads[seq - first_seq]``), drop the others."""
        for cell in np.flatnonzero(self._size != self._settled).tolist():
            a, b = int(self._settled[cell]), int(self._size[cell])
            seq = self._seqs[cell]
            keep = leads[seq[a:b] - first_seq]
            k = a + int(keep.sum())
            self._mats[cell][a:k] = self._mats[cell][a:b][keep]
            seq[a:k] = seq[a:b][keep]
            self._size[cell] = k
        self._settled = self._size.copy()
