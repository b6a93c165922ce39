"""One aiohttp application served on one TCP address: every HTTP server the package runs (the gateway
service, ``serve``, the dashboard, the simulated provider) listens through an :class:`AppServer`.

A port of 0 picks a free one; :attr:`AppServer.port` and the URL :meth:`AppServer.start` returns name
the address actually bound. A failed start closes what it opened; ``stop`` is safe to call twice.
"""

from __future__ import annotations

import logging
import ssl

from aiohttp import web

__all__ = ["AppServer"]


class AppServer:
    """``access_log=None`` logs no requests. With ``handler_cancellation`` a client that hangs up
    cancels its request's handler (by default the handler runs to its end)."""

    def __init__(
        self, *, access_log: logging.Logger | None = None, handler_cancellation: bool = False, backlog: int = 128
    ) -> None:
        self._access_log = access_log
        self._handler_cancellation = handler_cancellation
        self._backlog = backlog
        self._runner: web.AppRunner | None = None
        self.root_url: str | None = None  # the last start's, kept after stop
        self.port = 0

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(
        self, app: web.Application, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None
    ) -> str:
        """Listen on ``host:port``; returns the root URL of the bound address (``http://127.0.0.1:PORT``,
        an IPv6 address in brackets)."""
        runner = web.AppRunner(
            app,
            access_log=self._access_log,
            handle_signals=False,
            handler_cancellation=self._handler_cancellation,
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=self._backlog, ssl_context=ssl_context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        bound_host, self.port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.root_url = f"{'https' if ssl_context is not None else 'http'}://{shown}:{self.port}"
        self._runner = runner
        return self.root_url

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def __repr__(self) -> str:
        return f"AppServer({self.root_url if self.running else 'stopped'})"
