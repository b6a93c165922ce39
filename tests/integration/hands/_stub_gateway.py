"""A small model endpoint on loopback for the CLI-agent tests (the paid-model boundary).

Speaks OpenAI chat-completions (``/v1/chat/completions``) and Anthropic Messages (``/v1/messages``),
meters tokens per bearer token (one token per session, as the gateway hands them out) and stops a
token whose budget is spent with a 429 that tells the SDKs not to retry.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class StubGateway:
    budgets: dict[str, int] = field(default_factory=dict)  # token -> total tokens allowed
    used: Counter[str] = field(default_factory=Counter)  # token -> tokens metered
    calls: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    seen_keys: set[str] = field(default_factory=set)
    url: str = ""

    def _token(self, request: web.Request) -> str:
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip() or request.headers.get("x-api-key", "")
        self.seen_keys.add(token)
        return token

    def _over(self, token: str) -> bool:
        budget = self.budgets.get(token)
        return budget is not None and self.used[token] >= budget

    @staticmethod
    def _refuse() -> web.Response:
        body = {"error": {"type": "budget_exhausted", "message": "session budget exhausted"}}
        return web.json_response(body, status=429, headers={"x-should-retry": "false"})

    @staticmethod
    def _prompt_tokens(messages: list[dict[str, object]]) -> int:
        return max(1, len(json.dumps(messages)) // 4)

    async def openai(self, request: web.Request) -> web.Response:
        token = self._token(request)
        if self._over(token):
            self.refused[token] += 1
            return self._refuse()
        body = await request.json()
        pt, ct = self._prompt_tokens(body["messages"]), 12
        self.used[token] += pt + ct
        self.calls[token] += 1
        return web.json_response(
            {
                "id": f"chatcmpl-{self.calls[token]}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Looks fine overall.\nOne nit."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": pt,
                    "completion_tokens": ct,
                    "total_tokens": pt + ct,
                    "prompt_tokens_details": {"cached_tokens": 0},
                },
            }
        )

    async def anthropic(self, request: web.Request) -> web.Response:
        token = self._token(request)
        if self._over(token):
            self.refused[token] += 1
            return self._refuse()
        body = await request.json()
        pt, ct = self._prompt_tokens(body["messages"]), 9
        self.used[token] += pt + ct
        self.calls[token] += 1
        return web.json_response(
            {
                "id": f"msg_{self.calls[token]}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "Reviewed the partition.\nNothing severe."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": pt, "output_tokens": ct},
            }
        )


@asynccontextmanager
async def stub_gateway() -> AsyncIterator[StubGateway]:
    gw = StubGateway()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", gw.openai)
    app.router.add_post("/v1/messages", gw.anthropic)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    gw.url = f"http://127.0.0.1:{port}"
    try:
        yield gw
    finally:
        await runner.cleanup()
