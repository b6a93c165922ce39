"""The simulated provider's HTTP server (aiohttp): OpenAI (chat completions and the Responses API)
and Anthropic endpoints on one port.

Order of checks per chat request: authentication, body, quota, injected errors, hidden capacity,
then (in flight) an optional stall, latency (counted from the request's arrival), and the answer.
Injected errors and capacity refusals never enter the rate windows; every admitted request leaves
the in-flight count on every exit path.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import random
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web

from agent_fleet.app_server import AppServer
from agent_fleet.clock import Clock, RealClock
from agent_fleet.sim.behaviour import decide
from agent_fleet.sim.conversation import (
    BadRequest,
    Conversation,
    from_anthropic,
    from_openai,
    tokens_for_chars,
)
from agent_fleet.sim.embed import DIMENSIONS, embed
from agent_fleet.sim.rate_limits import Capacity, PromptCache, Refusal, SimStats
from agent_fleet.sim.settings import SimConfig
from agent_fleet.sim.window import context_overflow
from agent_fleet.sim.wire import RenderedReply, SimUsage, anthropic_error, openai_error, render
from agent_fleet.sim.wire_anthropic import anthropic_body, anthropic_events
from agent_fleet.sim.wire_openai import openai_body, openai_chunks
from agent_fleet.sim.wire_responses import from_responses, responses_body, responses_events

__all__ = ["Received", "SimProvider"]

Format = Literal["openai", "anthropic", "responses"]  # errors and headers of "responses" are OpenAI's
_JSON = "application/json"
_CHAT = "/v1/chat/completions"
_MESSAGES = "/v1/messages"
_RESPONSES = "/v1/responses"
_PATHS = {"openai": _CHAT, "anthropic": _MESSAGES, "responses": _RESPONSES}
_PARSERS = {"openai": from_openai, "anthropic": from_anthropic, "responses": from_responses}


@dataclass(frozen=True, slots=True)
class Received:
    """One chat request as it arrived (kept when the provider is started with ``record``)."""

    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]


class _Dropped(Exception):
    """The simulated provider hung up on this request."""


class SimProvider:
    """A simulated OpenAI- and Anthropic-compatible model server.

    ``async with SimProvider(config) as sim:`` starts it on a free loopback port; ``sim.base_url`` ends in
    ``/v1`` (for the OpenAI SDK), ``sim.root_url`` does not (for the Anthropic SDK).
    """

    def __init__(self, config: SimConfig | None = None, *, clock: Clock | None = None, record: int = 0) -> None:
        self.config = config or SimConfig()
        # With ``record``: the last ``record`` chat requests, headers and body as they arrived.
        self.received: deque[Received] | None = deque(maxlen=record) if record else None
        self._clock = clock or RealClock()
        self._rng = random.Random(self.config.seed)
        self._capacity = Capacity(self.config, self._clock)
        self._cache = PromptCache(max_entries=self.config.cache_entries, min_tokens=self.config.cache_min_tokens)
        self._stats = SimStats()
        self._server = AppServer(backlog=1024)
        self._request_seq = 0

    # ---- lifecycle -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post(_CHAT, self._openai_chat)
        app.router.add_post(_MESSAGES, self._anthropic_messages)
        app.router.add_post(_RESPONSES, self._openai_responses)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/sim/stats", self._stats_handler)
        app.router.add_post("/sim/reset", self._reset_handler)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 picks a free port); returns the base URL ending in ``/v1``."""
        if not self._server.running:
            await self._server.start(self.app(), host, port)
        return self.base_url

    async def stop(self) -> None:
        """Stop serving; safe to call twice."""
        await self._server.stop()

    async def __aenter__(self) -> SimProvider:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def root_url(self) -> str:
        if self._server.root_url is None:
            raise RuntimeError("the simulated provider is not started")
        return self._server.root_url

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def stats(self) -> dict[str, Any]:
        return self._stats.snapshot(self._capacity)

    def reset(self) -> None:
        """Zero the counters, rate windows and prompt cache (requests in flight keep counting)."""
        self._stats = SimStats()
        self._capacity.reset()
        self._cache.clear()

    def __repr__(self) -> str:
        where = self._server.root_url if self._server.running else "stopped"
        return f"SimProvider({where}, in_flight={self._capacity.in_flight})"

    # ---- helpers ---------------------------------------------------------------------------------

    def _next_request_id(self) -> str:
        self._request_seq += 1
        return f"req_sim{self._request_seq:012d}"

    @staticmethod
    def _authorized(request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:].strip():
            return True
        return bool(request.headers.get("x-api-key", "").strip())

    def _rate_headers(self, fmt: Format) -> dict[str, str]:
        if fmt != "anthropic":
            return self._capacity.openai_headers()
        return self._capacity.anthropic_headers()

    def _error(
        self,
        fmt: Format,
        status: int,
        kind: str,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        """An error in the provider's own shape; ``kind`` is the OpenAI type or the Anthropic error type."""
        request_id = self._next_request_id()
        all_headers = dict(headers or {})
        if fmt != "anthropic":
            all_headers["x-request-id"] = request_id
            body = openai_error(message, type_=kind, code=code)
        else:
            all_headers["request-id"] = request_id
            body = anthropic_error(message, type_=kind, request_id=request_id)
        self._stats.count(_PATHS[fmt], status)
        return web.Response(status=status, body=body, content_type=_JSON, headers=all_headers)

    def _rate_limited(self, fmt: Format, reason: str, retry_after: float, message: str) -> web.Response:
        self._stats.limited(reason)
        headers = self._rate_headers(fmt)
        headers["retry-after"] = str(max(1, math.ceil(retry_after)))
        if fmt != "anthropic":
            headers["retry-after-ms"] = str(max(1, round(retry_after * 1000)))
            return self._error(fmt, 429, "rate_limit_exceeded", message, code="rate_limit_exceeded", headers=headers)
        return self._error(fmt, 429, "rate_limit_error", message, headers=headers)

    @staticmethod
    def _refusal_message(refusal: Refusal) -> str:
        if refusal.reason == "concurrency":
            return f"Too many concurrent requests: limit {refusal.limit}. Please slow down."
        unit = "requests" if refusal.reason == "rpm" else "tokens"
        return (
            f"Rate limit reached for {unit} per min: limit {refusal.limit}, used {refusal.used}. "
            f"Please try again in {refusal.retry_after:.3g}s."
        )

    def _injected(self, fmt: Format) -> web.Response | Literal["stall"] | None:
        cfg = self.config
        if not (cfg.rate_429 or cfg.rate_500 or cfg.rate_503 or cfg.rate_529 or cfg.rate_stall):
            return None
        r = self._rng.random()
        edge = cfg.rate_429
        if r < edge:
            return self._rate_limited(fmt, "injected", 1.0, "Rate limit reached. Please try again in 1s.")
        edge += cfg.rate_500
        if r < edge:
            if fmt != "anthropic":
                msg = "The server had an error while processing your request. Sorry about that!"
                return self._error(fmt, 500, "server_error", msg)
            return self._error(fmt, 500, "api_error", "Internal server error")
        edge += cfg.rate_503
        if r < edge:
            return self._overloaded(fmt, 503)
        edge += cfg.rate_529
        if r < edge:
            return self._overloaded(fmt, 529)
        edge += cfg.rate_stall
        if r < edge:
            return "stall"
        return None

    def _overloaded(self, fmt: Format, status: int) -> web.Response:
        if fmt != "anthropic":
            # OpenAI has no 529: overload is a 503 with code server_is_overloaded.
            msg = "The server is overloaded or not ready yet."
            return self._error(fmt, 503, "server_error", msg, code="server_is_overloaded")
        return self._error(fmt, status, "overloaded_error", "Overloaded")

    # ---- chat ------------------------------------------------------------------------------------

    async def _openai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._chat(request, "openai")

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._chat(request, "anthropic")

    async def _openai_responses(self, request: web.Request) -> web.StreamResponse:
        return await self._chat(request, "responses")

    def _unknown_model(self, fmt: Format, model: str) -> web.Response:
        if fmt == "anthropic":
            return self._error(fmt, 404, "not_found_error", f"model: {model}")
        msg = f"The model `{model}` does not exist or you do not have access to it."
        return self._error(fmt, 404, "invalid_request_error", msg, code="model_not_found")

    async def _chat(self, request: web.Request, fmt: Format) -> web.StreamResponse:
        # The configured latency runs from the request's arrival, as a client sees a provider's: the
        # server's own parsing and rendering happen inside it, not on top of it.
        arrived = self._clock.now()
        if not self._authorized(request):
            if fmt != "anthropic":
                msg = "You didn't provide an API key. Provide it in an Authorization header (Bearer auth)."
                return self._error(fmt, 401, "invalid_request_error", msg)
            return self._error(fmt, 401, "authentication_error", "x-api-key header is required")
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            if self.received is not None:
                self.received.append(Received(request.path, request.query_string, dict(request.headers), body))
            conv = _PARSERS[fmt](body)
        except (ValueError, BadRequest) as exc:
            return self._error(fmt, 400, "invalid_request_error", str(exc) or "invalid JSON body")
        if self.config.reject_unknown_models and conv.model not in self.config.models:
            return self._unknown_model(fmt, conv.model)
        overflow = context_overflow(
            self.config.context_windows,
            model=conv.model,
            prompt_tokens=conv.prompt_tokens,
            body=body,
            anthropic=fmt == "anthropic",
        )
        if overflow is not None:
            return self._error(fmt, 400, "invalid_request_error", overflow[0], code=overflow[1])
        if self.config.insufficient_quota:
            return self._quota_error(fmt)
        injected = self._injected(fmt)
        if isinstance(injected, web.Response):
            return injected
        refusal = self._capacity.try_admit(conv.prompt_tokens)
        if refusal is not None:
            return self._rate_limited(fmt, refusal.reason, refusal.retry_after, self._refusal_message(refusal))
        output_tokens = 0
        try:
            if injected == "stall":
                self._stats.stalls += 1
                await self._clock.sleep(self.config.stall_seconds)
                if self._rng.random() < self.config.stall_drop:
                    raise _Dropped
                arrived = self._clock.now()  # a stall comes before the latency, not inside it
            decided = decide(
                conv,
                refute_pct=self.config.verifier_refute_pct,
                unsure_pct=self.config.verifier_unsure_pct,
                edits=self.config.edits,
            )
            self._stats.plans += any(name == "submit_plan" for name, _ in decided.calls)
            reply = render(conv, decided)
            cached = self._cache.lookup_and_store(conv)
            usage = SimUsage(conv.prompt_tokens, reply.completion_tokens, cached)
            delay = self.config.sample_latency(self._rng)
            per_token = self.config.per_output_token_s
            created = int(time.time())
            headers = self._rate_headers(fmt)
            headers["x-request-id" if fmt != "anthropic" else "request-id"] = self._next_request_id()
            # The work is billed once it is done, whether or not the client is still there to hear it.
            if conv.stream:
                chunks = _rendered_stream(fmt, reply, usage, conv, body, created)
                await self._until(arrived + delay)
                output_tokens = self._bill(conv, usage)
                return await self._stream(request, fmt, headers, chunks, per_token)
            payload = _rendered_body(fmt, reply, usage, conv, body, created)
            await self._until(arrived + delay + per_token * usage.completion_tokens)
            output_tokens = self._bill(conv, usage)
            response = web.Response(body=payload, content_type=_JSON, headers=headers)
            self._stats.count(request.path, 200)
            return response
        except _Dropped:
            self._stats.dropped += 1
            self._stats.count(request.path, 0)
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError from None
        finally:
            self._capacity.release(output_tokens)

    def _bill(self, conv: Conversation, usage: SimUsage) -> int:
        """Count an answer's tokens as billed; returns its output tokens."""
        self._stats.tokens_in += usage.prompt_tokens
        self._stats.tokens_out += usage.completion_tokens
        self._stats.cached_tokens += usage.cached_tokens
        if self.config.bill_by_conversation:
            key = conv.first_user_text()
            billed = self._stats.billed_by_conversation
            billed[key] = billed.get(key, 0) + usage.prompt_tokens + usage.completion_tokens
        return usage.completion_tokens

    async def _until(self, deadline: float) -> None:
        wait = deadline - self._clock.now()
        if wait > 0:
            await self._clock.sleep(wait)

    async def _stream(
        self,
        request: web.Request,
        fmt: Format,
        headers: dict[str, str],
        chunks: list[tuple[bytes, int]],
        per_token: float,
    ) -> web.StreamResponse:
        headers["Cache-Control"] = "no-cache"
        response = web.StreamResponse(status=200, headers=headers)
        response.content_type = "text/event-stream"
        self._stats.count(request.path, 200)
        await response.prepare(request)
        if per_token <= 0:
            await response.write(b"".join(c for c, _ in chunks))
        else:
            for chunk, tokens in chunks:
                if tokens:
                    await self._clock.sleep(per_token * tokens)
                await response.write(chunk)
        await response.write_eof()
        return response

    def _quota_error(self, fmt: Format) -> web.Response:
        if fmt != "anthropic":
            msg = (
                "You exceeded your current quota, please check your plan and billing details. "
                "For more information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors."
            )
            self._stats.limited("insufficient_quota")
            return self._error(fmt, 429, "insufficient_quota", msg, code="insufficient_quota")
        msg = (
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits."
        )
        return self._error(fmt, 400, "invalid_request_error", msg)

    # ---- the rest of the API -----------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        if "anthropic-version" in request.headers:
            data: list[dict[str, Any]] = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in self.config.models
            ]
            body: dict[str, Any] = {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        else:
            body = {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 1735689600, "owned_by": "sim"} for m in self.config.models
                ],
            }
        self._stats.count(request.path, 200)
        return web.Response(body=json.dumps(body).encode(), content_type=_JSON)

    async def _embeddings(self, request: web.Request) -> web.Response:
        path = request.path
        if not self._authorized(request):
            self._stats.count(path, 401)
            msg = "You didn't provide an API key. Provide it in an Authorization header (Bearer auth)."
            body = openai_error(msg, type_="invalid_request_error")
            return web.Response(status=401, body=body, content_type=_JSON)
        try:
            payload = json.loads(await request.read())
            texts = _embedding_inputs(payload.get("input"))
            dims = int(payload.get("dimensions") or DIMENSIONS)
            fmt = payload.get("encoding_format") or "float"
            model = str(payload.get("model") or "sim-embed")
        except (ValueError, AttributeError, TypeError) as exc:
            self._stats.count(path, 400)
            body = openai_error(f"invalid embeddings request: {exc}", type_="invalid_request_error")
            return web.Response(status=400, body=body, content_type=_JSON)
        data: list[dict[str, Any]] = []
        tokens = 0
        for i, text in enumerate(texts):
            vec = embed(text, dims)
            tokens += tokens_for_chars(len(text))
            value: Any = vec if fmt == "float" else base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": value})
        self._stats.tokens_in += tokens
        self._stats.count(path, 200)
        result = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return web.Response(body=json.dumps(result).encode(), content_type=_JSON, headers=self._rate_headers("openai"))

    async def _stats_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=json.dumps(self.stats()).encode(), content_type=_JSON)

    async def _reset_handler(self, request: web.Request) -> web.Response:
        self.reset()
        return web.Response(body=b'{"reset": true}', content_type=_JSON)


def _rendered_body(
    fmt: Format, reply: RenderedReply, usage: SimUsage, conv: Conversation, body: dict[str, Any], created: int
) -> bytes:
    if fmt == "anthropic":
        return anthropic_body(reply, usage, model=conv.model)
    if fmt == "responses":
        return responses_body(reply, usage, body, model=conv.model, created=created)
    return openai_body(reply, usage, model=conv.model, created=created)


def _rendered_stream(
    fmt: Format, reply: RenderedReply, usage: SimUsage, conv: Conversation, body: dict[str, Any], created: int
) -> list[tuple[bytes, int]]:
    if fmt == "anthropic":
        return anthropic_events(reply, usage, model=conv.model)
    if fmt == "responses":
        return responses_events(reply, usage, body, model=conv.model, created=created)
    return openai_chunks(reply, usage, model=conv.model, created=created, include_usage=conv.include_usage)


def _embedding_inputs(value: Any) -> list[str]:
    """Embedding inputs as texts: a string, a list of strings, or token arrays (spelled out as numbers)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            return list(value)
        if all(isinstance(v, int) for v in value):
            return [" ".join(f"t{v}" for v in value)]
        if all(isinstance(v, list) for v in value):
            return [" ".join(f"t{int(t)}" for t in v) for v in value]
    raise ValueError("'input' must be a string, an array of strings, or token arrays")
