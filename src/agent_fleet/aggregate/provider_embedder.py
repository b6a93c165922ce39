"""The provider's embeddings endpoint as an embedder.

:class:`EmbeddingsClient` is the small port the embedder needs: ``embed(session_id, texts)``. The
session id is the account the call is charged to. :class:`GatewayEmbeddingsClient` is the one the
engine uses: it goes through the spend plane's ``EmbeddingGateway`` port, so every request is
reserved against the session, run, queue and model budgets, rate-limited, retried and metered like
any model call (and refused with BudgetExhausted before sending when a cap would be crossed).
There is no other way to an embeddings endpoint: the gateway is the only holder of credentials, and
its meter the only count of what embeddings cost.

:class:`ProviderEmbedder` cuts a text longer than ``max_input_bytes`` (UTF-8) into windows, embeds
each and keeps their length-weighted mean: an embeddings endpoint refuses an input past its token
limit (8,192 for OpenAI's models), and a token is at least about 1.5 bytes of text, so 12,000 bytes
stay under it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from agent_fleet.aggregate.embedders import WindowedEmbedder
from agent_fleet.aggregate.vectors import Vector, normalized_dense
from agent_fleet.spend.port import EmbeddingGateway

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "EmbeddingsClient",
    "GatewayEmbeddingsClient",
    "ProviderEmbedder",
]

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


class EmbeddingsClient(Protocol):
    async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]: ...


class GatewayEmbeddingsClient:
    """Embeddings through the gateway (metered and budgeted: the gateway's meter is where their spend is
    counted); the gateway belongs to its owner."""

    def __init__(
        self, gateway: EmbeddingGateway, model: str = DEFAULT_EMBEDDING_MODEL, *, dimensions: int | None = None
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self._gateway = gateway

    async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        result = await self._gateway.embed(session_id, texts, model=self.model, dimensions=self.dimensions)
        return result.vectors

    async def aclose(self) -> None:
        """Nothing to close: the gateway is closed by whoever built it."""

    def __repr__(self) -> str:
        return f"GatewayEmbeddingsClient(model={self.model!r})"


def _windows(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` UTF-8 bytes, cut at a space when one is in the second
    half of the window, never inside a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return [text]
    out: list[str] = []
    start = 0
    while start < len(data):
        end = min(len(data), start + limit)
        if end < len(data):
            space = data.rfind(b" ", start + limit // 2, end)
            if space > start:
                end = space
            while end > start + 1 and (data[end] & 0xC0) == 0x80:  # a continuation byte: back off
                end -= 1
        out.append(data[start:end].decode("utf-8", "replace"))
        start = end
    return out


def _mean(vectors: Sequence[Sequence[float]], weights: Sequence[int]) -> list[float]:
    acc = [0.0] * len(vectors[0])
    for vec, w in zip(vectors, weights, strict=True):
        norm = math.sqrt(math.fsum(x * x for x in vec)) or 1.0
        scale = w / norm
        for i, x in enumerate(vec):
            acc[i] += x * scale
    return acc


class ProviderEmbedder(WindowedEmbedder):
    """Embeds through an :class:`EmbeddingsClient`, charged to ``session_id``; vectors renormalised.
    Its window is ``max_input_bytes`` (UTF-8) of text."""

    def __init__(
        self,
        client: EmbeddingsClient,
        *,
        session_id: str,
        model: str,
        threshold: float = 0.95,
        batch_size: int = 128,
        max_input_bytes: int = 12_000,
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._model = model
        self._threshold = threshold
        self._batch = batch_size
        self._window = max_input_bytes
        self._label = f"provider:{model}"

    @property
    def session_id(self) -> str:
        return self._session_id

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        pieces: list[str] = []
        owners: list[int] = []
        for i, text in enumerate(texts):
            for piece in _windows(text, self._window):
                pieces.append(piece)
                owners.append(i)
        raw: list[list[float]] = []
        for start in range(0, len(pieces), self._batch):
            raw.extend(await self._client.embed(self._session_id, pieces[start : start + self._batch]))
        if len(pieces) == len(texts):
            return [normalized_dense(v) for v in raw]
        grouped: list[tuple[list[list[float]], list[int]]] = [([], []) for _ in texts]
        for owner, piece, vec in zip(owners, pieces, raw, strict=True):
            grouped[owner][0].append(vec)
            grouped[owner][1].append(len(piece))
        return [normalized_dense(_mean(vecs, weights)) for vecs, weights in grouped]

    def __repr__(self) -> str:
        return f"ProviderEmbedder(name={self.name!r}, session_id={self._session_id!r})"
