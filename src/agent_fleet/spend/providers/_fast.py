"""The engine's own model calls: plain JSON POSTs over one aiohttp session per provider.

The gateway service forwards streams through httpx (``post`` in ``_wire``); the in-process
harness only ever needs a whole JSON answer, and for that a bare aiohttp session costs a fraction
of the CPU of a full client stack per call — at fleet concurrency that is most of the engine's
per-call overhead. Errors map to the same tree as ``_wire.post``.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from agent_fleet.spend.providers._wire import (
    SignalSink,
    connection_error,
    error_from_status,
    signals_from_headers,
)

__all__ = ["JsonPoster"]


class JsonPoster:
    """POSTs JSON to ``base_url/<path>``; created lazily on the running loop, closed by ``aclose``."""

    def __init__(self, *, base_url: str, headers: Mapping[str, str], timeout: float, max_connections: int) -> None:
        self._base = base_url.rstrip("/") + "/"
        self._headers = dict(headers)
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(timeout, 10.0))
        self._max = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max, limit_per_host=self._max, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=self._timeout, connector=connector, trust_env=False
            )
        return self._session

    async def post(
        self, path: str, payload: bytes, *, host: str, model: str, secret: str, on_signals: SignalSink | None
    ) -> bytes:
        session = self._open()
        try:
            async with session.post(self._base + path, data=payload) as response:
                body = await response.read()
                status, headers = response.status, response.headers
        except aiohttp.ClientConnectorError as exc:
            raise connection_error(host, timed_out=False, sent=False, cause=type(exc).__name__) from None
        except TimeoutError as exc:
            raise connection_error(host, timed_out=True, sent=True, cause=type(exc).__name__) from None
        except aiohttp.ClientError as exc:
            raise connection_error(host, timed_out=False, sent=True, cause=type(exc).__name__) from None
        if on_signals is not None:
            signals = signals_from_headers(headers)
            if signals is not None:
                on_signals(model, signals)
        if status >= 400:
            raise error_from_status(host, status, headers, body, scrub=secret)
        return body

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
