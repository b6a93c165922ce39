"""Embedders: the pluggable part of semantic deduplication.

Three implementations share one protocol:

* :class:`LexicalEmbedder` (this module): hashed character n-grams and words, pure Python, the
  default of the light install. It collapses reformatted, reordered and lightly edited texts, not
  paraphrases.
* :class:`~agent_fleet.aggregate.local.SentenceEmbedder`: all-MiniLM-L6-v2 on the CPU through
  sentence-transformers (the ``embed`` extra), offline, long texts chunked.
* :class:`~agent_fleet.aggregate.provider_embedder.ProviderEmbedder`: the provider's embeddings endpoint.

Each embedder returns unit vectors and names itself: ``name`` keys the embedding cache, so it must
change whenever the vectors would (model, dimension, chunking, features).
"""

from __future__ import annotations

import asyncio
import math
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import and_
from typing import Protocol, runtime_checkable

from agent_fleet.aggregate.text import normalize_text
from agent_fleet.aggregate.vectors import SparseVector, Vector, VectorKind, normalized_sparse

__all__ = ["Embedder", "LexicalEmbedder", "SyncEmbedder", "WindowedEmbedder", "embed_sync"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors; ``default_threshold`` is the cosine at which two texts say the same."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> VectorKind: ...

    @property
    def default_threshold(self) -> float: ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]: ...


@runtime_checkable
class SyncEmbedder(Embedder, Protocol):
    """An embedder that computes locally and can be called without an event loop."""

    def encode(self, texts: Sequence[str]) -> list[Vector]: ...


def embed_sync(embedder: Embedder, texts: Sequence[str]) -> list[Vector]:
    """Embed from synchronous code (benchmarks, finalisation in a worker thread)."""
    if isinstance(embedder, SyncEmbedder):
        return embedder.encode(texts)
    return asyncio.run(embedder.embed(texts))


class WindowedEmbedder:
    """What the dense embedders that cut a long text into windows share: ``name`` is the model's
    label and the window size (the embedding cache is keyed by it, and both change the vectors);
    ``default_threshold`` is the cosine the embedder was built with."""

    kind: VectorKind = "dense"
    _label: str
    _window: int
    _threshold: float

    @property
    def name(self) -> str:
        return f"{self._label}-w{self._window}"

    @property
    def default_threshold(self) -> float:
        return self._threshold


_DAMPED = [0.0, 1.0]  # 1 + log(tf) by term frequency tf (index 0 unused)


def _damped(*most: int) -> list[float]:
    """The table of ``1 + log(tf)``, long enough for the largest term frequency given."""
    while len(_DAMPED) <= max(most):
        _DAMPED.append(1.0 + math.log(len(_DAMPED)))
    return _DAMPED


@dataclass(frozen=True, kw_only=True, slots=True)
class LexicalEmbedder:
    """Sparse TF vectors over hashed character n-grams and words of the normalised text.

    Character n-grams (with the spaces between words) make the vector insensitive to sentence
    order and robust to inflection and typos; whole words keep two texts about different
    identifiers apart. Term frequencies are damped (1 + log tf) so a repeated boilerplate word
    does not dominate. Hashing uses CRC-32, which is stable across processes, so cached vectors
    stay valid.
    """

    ngram: int = 4
    buckets: int = 1 << 20
    word_weight: float = 1.0
    # Calibrated on the calibration half of tests/data/dedup: 0.80 is the lowest cosine with no
    # false merge there (hard negatives reach 0.79); the default keeps a 0.05 margin above it.
    default_threshold: float = 0.85
    kind: VectorKind = "sparse"

    @property
    def name(self) -> str:
        return f"lexical-c{self.ngram}-w{self.word_weight:g}-b{self.buckets}"

    def vector(self, text: str) -> SparseVector:
        norm = normalize_text(text)
        mask = self.buckets - 1
        padded = f" {norm} "
        n = self.ngram
        starts = range(max(1, len(padded) - n + 1))
        if padded.isascii():  # one byte per character: slicing the bytes gives each n-gram's UTF-8
            raw = padded.encode("ascii")
            grams: Iterable[bytes] = map(raw.__getitem__, map(slice, starts, range(n, len(raw) + n)))
        else:
            grams = (padded[i : i + n].encode("utf-8") for i in starts)
        # Hashing, masking and counting all run in C; keys come in first-occurrence order as before.
        counts = Counter(map(and_, map(zlib.crc32, grams), repeat(mask)))
        # A distinct seed keeps words from colliding on purpose with n-grams of the same spelling.
        words = map(str.encode, norm.split())  # UTF-8
        word_counts = Counter(map(and_, map(zlib.crc32, words, repeat(0x5BD1E995)), repeat(mask)))
        damped = _damped(max(counts.values(), default=0), max(word_counts.values(), default=0))
        weights = dict(zip(counts, map(damped.__getitem__, counts.values()), strict=True))
        for key, tf in word_counts.items():
            weights[key] = weights.get(key, 0.0) + self.word_weight * damped[tf]
        return normalized_sparse(weights)

    def encode(self, texts: Sequence[str]) -> list[Vector]:
        return [self.vector(t) for t in texts]

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        return self.encode(texts)
