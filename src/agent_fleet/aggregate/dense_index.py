"""Greedy leader assignment for dense unit vectors with numpy.

Per batch of queries (in order):

1. every pair at the threshold between a query and an earlier leader or an earlier query of the
   same batch, from the leaders' cells (:class:`~agent_fleet.aggregate.buckets.BucketIVF`): while
   there are at most ``exact_limit`` leaders one cell holds them all and every pair is found (exact);
   above that the cells are an inverted file and a query probes its home cell and the cells within
   a margin of it (at most ``nprobe``). Every score is an exact inner product; the inverted file can
   only miss a leader in a cell it did not probe;
2. the one-at-a-time rule over those pairs (:func:`~agent_fleet.aggregate.decide.decide_batch`): a
   query joins its most similar earlier leader, else it leads — a query of the batch can join a
   leader made earlier in the same batch.

The inverted file is rebuilt (new cells) when the leaders have grown fourfold, so its cells stay
small as the run grows; its probe margin is measured on the near-duplicate pairs the exact search
found first (``margin`` fixes it instead). benchmarks/dedup.py measures the time against the exact
self-join and the share of decisions identical to the exact computation.

``ann="faiss"`` names the same inverted file: faiss's ``IndexIVFFlat.range_search`` over the same
cells and probes took several times the CPU time of these products (benchmarks/dedup.py prints
both), so it is not used.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agent_fleet.aggregate.buckets import BucketIVF
from agent_fleet.aggregate.decide import decide_batch
from agent_fleet.aggregate.index import Assignment
from agent_fleet.aggregate.vectors import Vector

__all__ = ["NumpyLeaderIndex", "as_matrix"]

_EXACT_BATCH = 1024  # exact search scores a batch against itself too: keep it small
_IVF_BATCH = (4096, 32768)  # bounds of an inverted-file batch (half the leaders in between)
_PROBE_CELLS = 1 << 25  # cells x batch similarities held at once by the coarse step (128 MB)
_SAMPLE = 1024  # near-duplicate pairs kept from the exact search to measure the probe margin
_GROWTH = 4  # the cells are drawn again when the leaders have grown this many times over


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
    def __init__(
        self,
        *,
        threshold: float,
        exact_limit: int = 4096,
        ann: str = "auto",
        nprobe: int = 16,
        margin: float | None = None,
    ) -> None:
        if ann not in ("auto", "exact", "ivf", "faiss"):
            raise ValueError(f"unknown index {ann!r}: use auto, exact, ivf or faiss")
        self.threshold = threshold
        self.exact_limit = exact_limit
        self.nprobe = nprobe
        self.margin = margin
        self.mode = "ivf" if ann == "auto" else ann
        self._cells: BucketIVF | None = None
        self._built_at = 0
        self._seq = 0
        self._sample: list[tuple[np.ndarray, np.ndarray]] = []
        self._sampled = 0

    def __len__(self) -> int:
        return 0 if self._cells is None else len(self._cells)

    @property
    def uses_ann(self) -> bool:
        return self._cells is not None and self._cells.nlist > 1

    def _cells_for(self, dim: int) -> BucketIVF:
        cells = self._cells
        if cells is None:
            cells = self._cells = BucketIVF.flat(dim)
        n = len(cells)
        if self.mode != "exact" and n > self.exact_limit and (cells.nlist == 1 or n >= _GROWTH * self._built_at):
            rows, seqs = cells.leaders()
            del cells
            self._cells = None  # the old cells go before the new ones are filled
            sample = None
            if self._sample:
                sample = (np.vstack([a for a, _ in self._sample]), np.vstack([b for _, b in self._sample]))
            cells = self._cells = BucketIVF(
                rows, seqs, nprobe=self.nprobe, margin=self.margin, sample=sample, room=_GROWTH
            )
            self._built_at = n
        return cells

    def assign(self, vectors: Sequence[Vector] | np.ndarray) -> list[Assignment]:
        q = as_matrix(vectors)
        leader = np.empty(len(q), dtype=np.int64)
        sim = np.empty(len(q), dtype=np.float64)
        start = 0
        while start < len(q):
            cells = self._cells_for(q.shape[1])
            lo, hi = _IVF_BATCH
            hi = min(hi, _PROBE_CELLS // cells.nlist)
            step = min(hi, max(lo, len(cells) // 2)) if cells.nlist > 1 else _EXACT_BATCH
            stop = min(len(q), start + step)
            leader[start:stop], sim[start:stop] = self._assign_batch(cells, q[start:stop])
            start = stop
        return [Assignment(ld, sm) for ld, sm in zip(leader.tolist(), sim.tolist(), strict=True)]

    def _assign_batch(self, cells: BucketIVF, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        first = self._seq
        seqs = np.arange(first, first + len(q), dtype=np.int64)
        pi, pm, ps = cells.search(q, seqs, self.threshold)
        if cells.nlist == 1 and self._sampled < _SAMPLE and len(pi):
            take = min(len(pi), _SAMPLE - self._sampled)
            self._sample.append((q[pi[:take]], cells.rows(pm[:take])))
            self._sampled += take
        leader, sim = decide_batch(len(q), first, pi, pm, ps)
        cells.settle(first, leader == seqs)
        self._seq += len(q)
        return leader, sim
