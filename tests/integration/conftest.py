"""Fixtures for the integration tests: a tiny scripted HTTP model server on loopback (provider tests)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web


@dataclass
class Scripted:
    """Answers each request with the next scripted (status, body, headers); records what it got."""

    replies: list[tuple[int, Any, dict[str, str]]] = field(default_factory=list)
    default: Callable[[dict[str, Any]], tuple[int, Any, dict[str, str]]] | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.seen.append({"path": request.path, "body": body})
        self.headers.append(dict(request.headers))
        if self.replies:
            status, payload, headers = self.replies.pop(0)
        elif self.default is not None:
            status, payload, headers = self.default(body)
        else:
            status, payload, headers = 500, {"error": {"message": "no reply scripted"}}, {}
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return web.Response(status=status, text=text, headers=headers, content_type="application/json")


@pytest.fixture
async def scripted() -> AsyncIterator[Scripted]:
    script = Scripted()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", script.handle)
    app.router.add_post("/v1/messages", script.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    script.base_url = f"http://127.0.0.1:{port}/v1"
    yield script
    await runner.cleanup()
