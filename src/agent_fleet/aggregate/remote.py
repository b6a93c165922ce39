"""The provider's embeddings endpoint as an embedder.

:class:`EmbeddingsClient` is the small port the embedder needs: ``embed(session_id, texts)``. The
session id is the account the call is charged to, so provider embeddings are metered and budgeted
like any model call. :class:`HttpEmbeddingsClient` speaks the OpenAI wire shape
(``POST {base_url}/embeddings``) and reports the tokens of each call to ``on_usage``; a gateway
that grows an ``embed`` method satisfies the same port and replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx

from agent_fleet.aggregate.vectors import Vector, VectorKind, normalized_dense
from agent_fleet.errors import ClientRequestError, Overloaded, ProviderError, ProviderUnreachable, RateLimited

__all__ = ["EmbeddingsClient", "HttpEmbeddingsClient", "ProviderEmbedder"]


class EmbeddingsClient(Protocol):
    async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]: ...


UsageSink = Callable[[str, str, int], None]  # (session_id, model, input tokens)


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


class ProviderEmbedder:
    """Embeds through an :class:`EmbeddingsClient`, charged to ``session_id``; vectors renormalised."""

    kind: VectorKind = "dense"

    def __init__(
        self,
        client: EmbeddingsClient,
        *,
        session_id: str,
        model: str,
        threshold: float = 0.95,
        batch_size: int = 128,
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._model = model
        self._threshold = threshold
        self._batch = batch_size

    @property
    def name(self) -> str:
        return f"provider:{self._model}"

    @property
    def default_threshold(self) -> float:
        return self._threshold

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        out: list[Vector] = []
        for start in range(0, len(texts), self._batch):
            part = texts[start : start + self._batch]
            out.extend(normalized_dense(v) for v in await self._client.embed(self._session_id, part))
        return out

    def __repr__(self) -> str:
        return f"ProviderEmbedder(name={self.name!r}, session_id={self._session_id!r})"
