"""The provider's embeddings endpoint as an embedder.

:class:`EmbeddingsClient` is the small port the embedder needs: ``embed(session_id, texts)``. The
session id is the account the call is charged to. :class:`GatewayEmbeddingsClient` is the one the
engine uses: it goes through the spend plane's ``EmbeddingGateway`` port, so every request is
reserved against the session, run, queue and model budgets, rate-limited, retried and metered like
any model call (and refused with BudgetExhausted before sending when a cap would be crossed).
:class:`HttpEmbeddingsClient` calls an OpenAI-shaped endpoint directly, unmetered, and only reports
the tokens of each call to ``on_usage`` (tools and tests that run without a gateway).

:class:`ProviderEmbedder` cuts a text longer than ``max_input_bytes`` (UTF-8) into windows, embeds
each and keeps their length-weighted mean: an embeddings endpoint refuses an input past its token
limit (8,192 for OpenAI's models), and a token is at least about 1.5 bytes of text, so 12,000 bytes
stay under it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Protocol

import httpx

from agent_fleet.aggregate.embedders import WindowedEmbedder
from agent_fleet.aggregate.vectors import Vector, normalized_dense
from agent_fleet.errors import ClientRequestError, Overloaded, ProviderError, ProviderUnreachable, RateLimited
from agent_fleet.spend.port import EmbeddingGateway

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "EmbeddingsClient",
    "GatewayEmbeddingsClient",
    "HttpEmbeddingsClient",
    "ProviderEmbedder",
]

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


class EmbeddingsClient(Protocol):
    async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]: ...


UsageSink = Callable[[str, str, int], None]  # (session_id, model, input tokens)


class GatewayEmbeddingsClient:
    """Embeddings through the gateway (metered and budgeted); the gateway belongs to its owner."""

    def __init__(
        self, gateway: EmbeddingGateway, model: str = DEFAULT_EMBEDDING_MODEL, *, dimensions: int | None = None
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self._gateway = gateway
        self.tokens = 0
        self.cost_usd = Decimal(0)
        self.calls = 0

    async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        result = await self._gateway.embed(session_id, texts, model=self.model, dimensions=self.dimensions)
        self.calls += 1
        self.tokens += result.usage.input_tokens
        self.cost_usd += result.cost_usd
        return result.vectors

    async def aclose(self) -> None:
        """Nothing to close: the gateway is closed by whoever built it."""

    def __repr__(self) -> str:
        return f"GatewayEmbeddingsClient(model={self.model!r}, calls={self.calls}, tokens={self.tokens})"


class HttpEmbeddingsClient:
    """OpenAI-compatible embeddings over httpx. The API key goes in a header and nowhere else."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 60.0,
        on_usage: UsageSink | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dimensions = dimensions
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._on_usage = on_usage
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self.tokens = 0

    async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        payload: dict[str, Any] = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        try:
            resp = await self._http.post(f"{self.base_url}/embeddings", json=payload, headers=self._headers)
        except httpx.HTTPError as exc:
            raise ProviderUnreachable(f"embeddings endpoint {self.base_url} unreachable: {type(exc).__name__}") from exc
        if resp.status_code != 200:
            raise _error_for(resp)
        body = resp.json()
        data = sorted(body.get("data", []), key=lambda d: int(d.get("index", 0)))
        if len(data) != len(texts):
            raise ProviderError(f"embeddings endpoint returned {len(data)} vectors for {len(texts)} texts")
        tokens = int((body.get("usage") or {}).get("prompt_tokens", 0))
        self.tokens += tokens
        if self._on_usage is not None:
            self._on_usage(session_id, self.model, tokens)
        return [[float(x) for x in d["embedding"]] for d in data]

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    def __repr__(self) -> str:
        return f"HttpEmbeddingsClient(base_url={self.base_url!r}, model={self.model!r}, tokens={self.tokens})"


def _error_for(resp: httpx.Response) -> ProviderError:
    status = resp.status_code
    msg = f"embeddings endpoint answered {status}"
    if status == 429:
        retry = resp.headers.get("retry-after")
        return RateLimited(msg, status=status, retry_after=float(retry) if retry else None)
    if status >= 500:
        return Overloaded(msg, status=status)
    return ClientRequestError(msg, status=status)


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
