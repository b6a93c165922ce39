"""The providers over real HTTP on loopback: what the default transport reports when no answer comes.

Everything a provider reads from an answer is tested over the mock transport (tests/unit/spend).
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from agent_fleet.domain.model import ChatRequest
from agent_fleet.errors import (
    ProviderUnreachable,
)
from agent_fleet.spend.providers import (
    OpenAIProvider,
    ProviderTimeout,
)

KEY = "sk-test-SECRET-0123456789"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_names_the_host_not_the_key():
    port = _free_port()
    p = OpenAIProvider(api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", timeout=2.0)
    try:
        with pytest.raises(ProviderUnreachable) as info:
            await p.complete(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
    finally:
        await p.aclose()
    assert f"127.0.0.1:{port}" in str(info.value)
    assert KEY not in str(info.value)
    assert info.value.sent is False  # type: ignore[attr-defined]
    assert "KEY" not in repr(p) and KEY not in repr(p)


async def test_read_timeout_is_a_timeout_that_was_sent():
    from aiohttp import web

    app = web.Application()

    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(2.0)
        return web.json_response({})

    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    p = OpenAIProvider(api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", timeout=0.2)
    try:
        with pytest.raises(ProviderTimeout) as info:
            await p.complete(ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}]))
    finally:
        await p.aclose()
        await runner.cleanup()
    assert info.value.sent is True  # type: ignore[attr-defined]
