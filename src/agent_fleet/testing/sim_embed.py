"""Deterministic text embeddings: a signed, hashed bag of words and character trigrams.

Texts that share most of their words and trigrams get cosine similarity near 1; unrelated texts land
near 0. Vectors are unit length and 384-dimensional, the shape of all-MiniLM-L6-v2, so code built for
that model runs unchanged against the simulated provider.
"""

from __future__ import annotations

import math
import re
import zlib
from functools import lru_cache

__all__ = ["DIMENSIONS", "embed"]

DIMENSIONS = 384
_WORD = re.compile(r"\w+")
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.35


@lru_cache(maxsize=200_000)
def _slot(feature: str) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8", "surrogatepass"))
    return h % DIMENSIONS, (1.0 if (h >> 16) & 1 else -1.0)


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """A unit vector for ``text``; ``dimensions`` < 384 truncates and renormalises."""
    vec = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        idx, sign = _slot("w:" + word)
        vec[idx] += sign * _WORD_WEIGHT
        padded = f" {word} "
        for i in range(len(padded) - 2):
            idx, sign = _slot(padded[i : i + 3])
            vec[idx] += sign * _TRIGRAM_WEIGHT
    vec = vec[: max(1, min(dimensions, DIMENSIONS))]
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # An empty text still gets a unit vector, so cosine similarity is always defined.
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]
