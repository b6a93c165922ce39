"""What the two wire formats share: one provider endpoint, its key, its options and its two HTTP paths.

The engine's own calls go through the :class:`JsonPoster` (whole JSON answers); the gateway
service's pass-through (``send_raw``, streams included) goes through an httpx client that is built
on first use, so an engine that never serves the gateway never builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Required, TypedDict

import httpx

from agent_fleet.spend.providers._fast import JsonPoster
from agent_fleet.spend.providers._wire import SignalSink, host_of, make_client, post

__all__ = ["HttpProvider", "ProviderOptions", "ProviderSettings"]

_CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key"})


class ProviderSettings(TypedDict, total=False):
    """What a provider is built with beyond its endpoint, model and key."""

    timeout: float
    max_connections: int
    name: str | None
    on_signals: SignalSink | None


class ProviderOptions(ProviderSettings, total=False):
    """What every provider is built with (the keywords of :class:`HttpProvider`)."""

    api_key: Required[str]
    base_url: str | None
    model: str | None


class HttpProvider:
    raw_path: ClassVar[str]  # where ``send_raw`` posts: the format's chat endpoint
    kind: ClassVar[str]  # the wire format, also the provider's name unless it is given one
    default_base_url: ClassVar[str]
    default_model: ClassVar[str]

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str | None = None,
        timeout: float = 120.0,
        max_connections: int = 64,
        name: str | None = None,
        on_signals: SignalSink | None = None,
    ) -> None:
        """``base_url``, ``model`` and ``name`` left out (or empty) are the format's own."""
        self.name = name or self.kind
        self.model = model or self.default_model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.host = host_of(self.base_url)
        self.on_signals = on_signals
        self._key = api_key
        self._headers = self.auth_headers(api_key)
        self._timeout = timeout
        self._max_connections = max_connections
        self._client: httpx.AsyncClient | None = None
        self._poster = JsonPoster(
            base_url=self.base_url, headers=self._headers, timeout=timeout, max_connections=max_connections
        )

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        """The headers every request carries: the key as the format sends it, and the content type."""
        raise NotImplementedError

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = make_client(
                base_url=self.base_url,
                headers=self._headers,
                timeout=self._timeout,
                max_connections=self._max_connections,
            )
        return self._client

    async def _post_json(self, path: str, payload: bytes, model: str) -> bytes:
        return await self._poster.post(
            path, payload, host=self.host, model=model, secret=self._key, on_signals=self.on_signals
        )

    async def send_raw(
        self,
        payload: bytes,
        *,
        model: str,
        stream: bool = False,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """POST an already-encoded body to ``path`` (default: the format's chat endpoint; a query string
        may follow it), with the client's own ``headers`` over the provider's (the gateway service's
        pass-through). The provider's credentials are set here and cannot be overridden."""
        sent = None
        if headers:
            sent = {**self._headers}
            sent.update((k, v) for k, v in headers.items() if k.lower() not in _CREDENTIALS)
        return await post(
            self.client,
            path or self.raw_path,
            payload,
            headers=sent,
            host=self.host,
            model=model,
            secret=self._key,
            on_signals=self.on_signals,
            stream=stream,
        )

    async def aclose(self) -> None:
        await self._poster.aclose()
        if self._client is not None:
            await self._client.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"
