"""The provider probe ``open_engine`` runs before a run starts: is anything answering HTTP there."""

from __future__ import annotations

from urllib.parse import urlsplit

import aiohttp

from agent_fleet.errors import ProviderUnreachable

__all__ = ["check_provider"]


async def check_provider(base_url: str, *, timeout: float = 5.0) -> None:
    """Raise ProviderUnreachable unless something answers HTTP at ``base_url`` (no credential sent).

    With ``trust_env=False``: like the engine's own calls (``spend/providers/_fast.py``), it reads
    no proxy from the environment, so the check reaches the provider the way the calls will.
    """
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), trust_env=False) as session,
            session.get(base_url.rstrip("/") + "/models") as response,
        ):
            await response.read()
    except (aiohttp.ClientError, TimeoutError, ValueError):
        host = urlsplit(base_url).netloc or base_url
        raise ProviderUnreachable(f"model provider at {host} is unreachable") from None
