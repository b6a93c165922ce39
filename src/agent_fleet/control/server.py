"""``agent-fleet serve``: the host and its API on one listening socket.

Loopback by default. Any other address needs TLS (``tls_cert``/``tls_key``) or an explicit
``insecure``: bearer tokens never cross a network in clear by accident.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import ssl
from collections.abc import Callable, Mapping

from agent_fleet.app_server import AppServer
from agent_fleet.config import load_config
from agent_fleet.control.api import Mount, build_app
from agent_fleet.control.host import FleetHost
from agent_fleet.control.teams import TeamTokens
from agent_fleet.errors import UsageError

__all__ = ["check_address", "serve"]

_logger = logging.getLogger(__name__)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(host: str, *, tls: bool, insecure: bool) -> None:
    """UsageError unless ``host`` is loopback, or TLS is on, or ``insecure`` was asked for."""
    if not _loopback(host) and not tls and not insecure:
        raise UsageError(f"--host {host} is not loopback: give --tls-cert and --tls-key, or --insecure")


def _tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise UsageError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot load the TLS certificate: {exc}") from None
    return context


async def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8700,
    store_url: str | None = None,
    config_path: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure: bool = False,
    env: Mapping[str, str] | None = None,
    on_ready: Callable[[str], None] | None = None,
    mount: Mount | None = None,
) -> None:
    """Serve until cancelled; ``on_ready(url)`` once the socket listens. Live runs are interrupted on
    the way out (``POST /v1/runs/{id}/resume`` or ``agent-fleet resume`` continues them)."""
    context = _tls(tls_cert, tls_key)
    check_address(host, tls=context is not None, insecure=insecure)
    env = os.environ if env is None else env
    config = await asyncio.to_thread(load_config, config_path)
    tokens = TeamTokens(config.teams, env)  # a missing token variable stops the start, before anything opens
    protect = tuple(p for p in (tls_cert, tls_key) if p)  # never an input, as the store and fleet.yaml
    async with FleetHost.open(store_url=store_url, config_path=config_path, env=env, protect=protect) as fleet:
        for run_id in await fleet.recover():  # runs a killed server (or a crashed deploy) left live
            _logger.warning("resumed run %s: its process is gone", run_id)
        server = AppServer(access_log=_logger)
        await server.start(build_app(fleet, tokens, mount=mount), host, port, ssl_context=context)
        try:
            scheme = "https" if context is not None else "http"
            shown = f"[{host}]" if ":" in host else host
            if on_ready is not None:
                on_ready(f"{scheme}://{shown}:{server.port}")
            await asyncio.Event().wait()
        finally:
            await server.stop()
