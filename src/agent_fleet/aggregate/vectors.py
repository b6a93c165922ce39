"""Embedding vectors without numpy: dense (``array('f')``) and sparse (``dict[int, float]``).

Every embedder returns unit vectors, so cosine similarity is a plain dot product. Dense vectors
from numpy-backed embedders are converted to ``array('f')`` at the boundary, which numpy reads back
without a copy (``numpy.frombuffer``); the light install never needs numpy.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import mul, truediv
from typing import Literal, TypeAlias

__all__ = [
    "DenseVector",
    "SparseVector",
    "Vector",
    "VectorKind",
    "decode_vector",
    "dense",
    "dot",
    "encode_vector",
    "normalized_dense",
    "normalized_sparse",
]

DenseVector: TypeAlias = "array[float]"  # typecode 'f'
SparseVector: TypeAlias = dict[int, float]
Vector: TypeAlias = "array[float] | dict[int, float]"
VectorKind = Literal["dense", "sparse"]


def dense(values: Iterable[float]) -> DenseVector:
    return array("f", values)


def normalized_dense(values: Sequence[float]) -> DenseVector:
    norm = math.sqrt(math.fsum(v * v for v in values))
    if norm == 0.0:
        return array("f", values)
    return array("f", (v / norm for v in values))


def normalized_sparse(weights: dict[int, float]) -> SparseVector:
    norm = math.sqrt(math.fsum(map(mul, weights.values(), weights.values())))
    if norm == 0.0:
        return {}
    if 0.0 in weights.values():
        return {k: w / norm for k, w in weights.items() if w != 0.0}
    return dict(zip(weights, map(truediv, weights.values(), repeat(norm)), strict=True))


def dot(a: Vector, b: Vector) -> float:
    if isinstance(a, dict) and isinstance(b, dict):
        # The key intersection, the products and their sum all run in C (in the intersection's order).
        shared = a.keys() & b.keys()
        total: float = sum(map(mul, map(a.__getitem__, shared), map(b.__getitem__, shared)))
        return total
    if isinstance(a, dict) or isinstance(b, dict):
        raise TypeError("cannot compare a sparse vector with a dense one")
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


# Storage format: one kind byte, then float32 values (dense) or (int32 key, float32 weight) pairs.
_DENSE, _SPARSE = b"d", b"s"


def encode_vector(vec: Vector) -> bytes:
    if isinstance(vec, dict):
        keys = array("i", vec.keys())
        vals = array("f", vec.values())
        return _SPARSE + struct.pack("<I", len(keys)) + keys.tobytes() + vals.tobytes()
    return _DENSE + array("f", vec).tobytes()


def decode_vector(blob: bytes) -> Vector:
    kind, body = blob[:1], blob[1:]
    if kind == _DENSE:
        out = array("f")
        out.frombytes(body)
        return out
    if kind == _SPARSE:
        (n,) = struct.unpack("<I", body[:4])
        keys, vals = array("i"), array("f")
        keys.frombytes(body[4 : 4 + 4 * n])
        vals.frombytes(body[4 + 4 * n : 4 + 8 * n])
        return dict(zip(keys, vals, strict=True))
    raise ValueError("unknown vector encoding")
