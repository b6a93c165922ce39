"""The default :class:`~agent_fleet.spend.providers.transport.Transport`: real HTTP.

``post`` (the engine's own calls, a whole JSON answer) goes through the small HTTP/1.1 pool of
:mod:`._fast`, which costs a call far less CPU than a client stack. ``open`` (the gateway service's
pass-through, streams included) goes through httpx over aiohttp's connection pool, built on first use,
so an engine that never serves the gateway never builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import httpx
from httpx_aiohttp import AiohttpTransport

from agent_fleet.spend.providers._fast import JsonPoster
from agent_fleet.spend.providers.transport import Answer, Endpoint, TransportError

__all__ = ["HttpTransport", "make_client"]


def make_client(
    *, base_url: str, headers: Mapping[str, str], timeout: float, max_connections: int
) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    # httpx's API over aiohttp's connection pool: httpcore's pool does work per pooled connection on
    # every request (an expiry probe of each socket), which dominated a call's CPU at fleet concurrency.
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/") + "/",
        headers=dict(headers),
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        transport=AiohttpTransport(limits=limits, trust_env=False),
    )


def _failure(exc: httpx.HTTPError) -> TransportError:
    not_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    timed_out = isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout)
    return TransportError(type(exc).__name__, sent=not not_sent, timed_out=timed_out)


class HttpTransport:
    """Real HTTP to one endpoint (see the module docstring); ``HttpTransport`` is a transport factory."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._poster = JsonPoster(
            base_url=endpoint.base_url,
            headers=endpoint.headers,
            timeout=endpoint.timeout,
            max_connections=endpoint.max_connections,
        )
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            e = self.endpoint
            self._client = make_client(
                base_url=e.base_url, headers=e.headers, timeout=e.timeout, max_connections=e.max_connections
            )
        return self._client

    async def post(self, path: str, payload: bytes, *, on_progress: Callable[[int], None] | None = None) -> Answer:
        return await self._poster.post(path, payload, on_progress=on_progress)

    async def open(
        self, path: str, payload: bytes, *, headers: Mapping[str, str] | None = None, stream: bool = False
    ) -> httpx.Response:
        client = self.client
        try:
            if stream:
                response = await client.send(
                    client.build_request("POST", path, content=payload, headers=headers), stream=True
                )
            else:
                response = await client.post(path, content=payload, headers=headers)
        except httpx.HTTPError as exc:
            raise _failure(exc) from None
        if stream and response.status_code >= 400:
            try:
                await response.aread()
            except httpx.HTTPError as exc:
                raise _failure(exc) from None
            finally:
                await response.aclose()
        return response

    async def aclose(self) -> None:
        await self._poster.aclose()
        if self._client is not None:
            await self._client.aclose()
