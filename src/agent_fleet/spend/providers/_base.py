"""What the two wire formats share: one provider endpoint, its key and its two HTTP paths.

The engine's own calls go through the :class:`JsonPoster` (whole JSON answers); the gateway
service's pass-through (``send_raw``, streams included) goes through an httpx client that is built
on first use, so an engine that never serves the gateway never builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import httpx

from agent_fleet.spend.providers._fast import JsonPoster
from agent_fleet.spend.providers._wire import SignalSink, host_of, make_client, post

__all__ = ["HttpProvider"]

_CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key"})


class HttpProvider:
    raw_path: ClassVar[str]  # where ``send_raw`` posts: the format's chat endpoint

    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str,
        api_key: str,
        headers: Mapping[str, str],
        timeout: float,
        max_connections: int,
        on_signals: SignalSink | None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.host = host_of(self.base_url)
        self.on_signals = on_signals
        self._key = api_key
        self._headers = dict(headers)
        self._timeout = timeout
        self._max_connections = max_connections
        self._client: httpx.AsyncClient | None = None
        self._poster = JsonPoster(
            base_url=self.base_url, headers=headers, timeout=timeout, max_connections=max_connections
        )

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
