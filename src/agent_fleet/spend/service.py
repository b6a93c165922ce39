"""The gateway as an HTTP service: OpenAI-compatible ``/v1/chat/completions`` and ``/v1/embeddings`` and
Anthropic-compatible ``/v1/messages``, streaming included, in front of the configured providers.

Each session gets its own token (:class:`SessionTokens`), good only for that session and its budget;
clients send it as their API key (``Authorization: Bearer`` or ``x-api-key``). Provider keys never
leave the process. Every request takes the same path as an in-process call (``Gateway.slot``):
reserve → permit → retries → meter. A refused request (budget) gets HTTP 402 with
``error.type = "budget_exceeded"``, which SDKs do not retry.

Model choice: a request naming a model routed in the gateway goes to that provider with that model;
any other model name is served by the default provider with its configured model. When the client's
format matches the provider's, the body is passed through (only ``model``, a missing ``max_tokens`` and
OpenAI's ``stream_options`` are set); otherwise it is translated both ways, and a stream is written
from the finished answer. A request without ``max_tokens`` gets ``default_max_tokens``, so every call
has a worst case to reserve.

Embeddings go through ``Gateway.embed`` with the model the request names (a fleet.yaml name or a model
id; unrouted names go to the default provider), so they are metered and budget-stopped (402) like
chat calls; ``encoding_format`` ``float`` or ``base64`` (the OpenAI SDK's default) is honoured, and
``input`` is a string or an array of strings. A provider without an embeddings endpoint gets a 400
naming the fix.

Admin endpoints (``Authorization: Bearer <admin token>``): ``POST /fleet/sessions`` ``{session_id,
queue?}`` → ``{token}``; ``POST /fleet/budget`` ``{id, tokens?, usd?}``; ``GET /fleet/stats``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from agent_fleet.errors import BudgetExhausted, ConfigError, FleetError, ProviderError, ProviderUnreachable
from agent_fleet.spend.gateway import Gateway, apply_budget_event
from agent_fleet.spend.port import ModelProvider
from agent_fleet.spend.providers import ProviderTimeout
from agent_fleet.spend.providers.anthropic import (
    anthropic_usage,
    from_anthropic_request,
    to_anthropic_response,
)
from agent_fleet.spend.providers.openai import from_openai_request, openai_usage, to_openai_response
from agent_fleet.spend.sse import UsageTap, anthropic_stream, openai_stream

__all__ = ["CallObserver", "GatewayService", "SessionTokens"]

CallObserver = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Called after every proxied request with (session_id, {model, outcome, usage?, cost_usd?, ...})."""

_JSON = "application/json"


class SessionTokens:
    """Per-session bearer tokens: ``fgw-<session id, base64url>.<HMAC-SHA256>``; revocable."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or os.urandom(32)
        self._revoked: set[str] = set()

    def issue(self, session_id: str) -> str:
        self._revoked.discard(session_id)
        sid = base64.urlsafe_b64encode(session_id.encode()).decode().rstrip("=")
        return f"fgw-{sid}.{self._mac(session_id)}"

    def _mac(self, session_id: str) -> str:
        return hmac.new(self._secret, session_id.encode(), hashlib.sha256).hexdigest()[:40]

    def verify(self, token: str) -> str | None:
        """The session id the token was issued for, or None."""
        if not token.startswith("fgw-") or "." not in token:
            return None
        sid, mac = token[4:].rsplit(".", 1)
        try:
            session_id = base64.urlsafe_b64decode(sid + "=" * (-len(sid) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        if not hmac.compare_digest(mac, self._mac(session_id)) or session_id in self._revoked:
            return None
        return session_id

    def revoke(self, session_id: str) -> None:
        self._revoked.add(session_id)

    def __repr__(self) -> str:
        return f"<SessionTokens revoked={len(self._revoked)}>"


def _error(fmt: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    if fmt == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "code": kind, "param": None}}
    return web.Response(status=status, body=json.dumps(body).encode(), content_type=_JSON, headers=headers)


def _provider_error(fmt: str, exc: FleetError) -> web.Response:
    message = str(exc)
    if isinstance(exc, ProviderError):
        headers = {"retry-after": f"{exc.retry_after:g}"} if exc.retry_after else None
        status = exc.status or 502
        kinds = {
            "RateLimited": "rate_limit_error" if fmt == "anthropic" else "rate_limit_exceeded",
            "Overloaded": "overloaded_error" if fmt == "anthropic" else "server_error",
            "QuotaExhausted": "insufficient_quota",
            "ClientRequestError": "invalid_request_error",
        }
        return _error(fmt, status, kinds.get(type(exc).__name__, "api_error"), message, headers)
    if isinstance(exc, ProviderTimeout):
        return _error(fmt, 504, "timeout", message)
    return _error(fmt, 502, "api_error", message)


def _encode_vector(vector: list[float]) -> str:
    """OpenAI's base64 embedding: little-endian float32."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


class GatewayService:
    def __init__(
        self,
        gateway: Gateway,
        *,
        tokens: SessionTokens | None = None,
        admin_token: str | None = None,
        default_max_tokens: int = 4096,
        on_call: CallObserver | None = None,
    ) -> None:
        self.gateway = gateway
        self.tokens = tokens or SessionTokens()
        self.admin_token = admin_token or f"fga-{secrets.token_urlsafe(24)}"
        self.default_max_tokens = default_max_tokens
        self.on_call = on_call
        self._runner: web.AppRunner | None = None
        self.root_url = ""

    # --- lifecycle --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/embeddings", self._embeddings)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/healthz", self._health)
        app.router.add_post("/fleet/sessions", self._issue)
        app.router.add_post("/fleet/budget", self._budget)
        app.router.add_get("/fleet/stats", self._stats)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve; returns the root URL (OpenAI clients use ``root + "/v1"``, Anthropic clients the root)."""
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=1024)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.root_url = f"http://{shown}:{bound[1]}"
        return self.root_url

    async def aclose(self) -> None:
        """Stop serving (the gateway and its providers stay open for their owner). Safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> GatewayService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def issue(self, session_id: str, *, queue: str | None = None) -> str:
        """A token for one session (the in-process way; the HTTP way is ``POST /fleet/sessions``)."""
        if queue is not None:
            self.gateway.register_session(session_id, queue=queue)
        return self.tokens.issue(session_id)

    # --- model endpoints ------------------------------------------------------------------------

    def _session_of(self, request: web.Request) -> str | None:
        auth = request.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "")
        return self.tokens.verify(token) if token else None

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "openai")

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "anthropic")

    def _route(self, requested: str) -> tuple[ModelProvider, str]:
        gw = self.gateway
        if requested and requested in gw.routes:
            return gw.routes[requested], gw.aliases.get(requested, requested)
        return gw.provider, str(getattr(gw.provider, "model", requested))

    async def _handle(self, request: web.Request, fmt: str) -> web.StreamResponse:
        session_id = self._session_of(request)
        if session_id is None:
            return _error(fmt, 401, "authentication_error", "invalid or missing gateway token")
        raw = await request.read()
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            return _error(fmt, 400, "invalid_request_error", "the request body is not a JSON object")
        provider, model = self._route(str(body.get("model") or ""))
        kind = getattr(provider, "kind", "openai")
        stream = bool(body.get("stream"))
        max_field = "max_tokens"
        if fmt == "openai" and body.get("max_completion_tokens") is not None:
            max_field = "max_completion_tokens"
        if body.get(max_field) is None:
            body[max_field] = self.default_max_tokens
        max_tokens = int(body[max_field])
        gw = self.gateway
        estimate_key = f"{model}#http"
        raw_estimate = len(raw) // 3 + 16  # JSON text: about 3 bytes a token or more
        prompt = gw.estimator.estimate_raw(estimate_key, raw_estimate)
        outcome: dict[str, Any] = {"model": model, "format": fmt, "stream": stream}
        try:
            async with gw.slot(
                session_id, model=model, prompt_tokens=prompt, max_tokens=max_tokens, provider=provider
            ) as slot:
                if kind == fmt and hasattr(provider, "send_raw"):
                    response = await self._pass_through(request, slot, provider, fmt, body, model, stream)
                else:
                    response = await self._translate(request, slot, provider, fmt, body, model, stream)
                outcome.update(outcome="ok" if slot.charged and not slot.streaming else "cut")
                usage = gw.meter.session(session_id)
                outcome.update(cost_usd=str(slot.cost), session_tokens=usage.total_tokens)
            if slot.charged:
                gw.estimator.observe(estimate_key, raw_estimate, slot.last_input_tokens)
        except BudgetExhausted as exc:
            outcome.update(outcome="budget_exhausted", scope=exc.scope, message=str(exc))
            await self._notify(session_id, outcome)
            return _error(fmt, 402, "budget_exceeded", str(exc))
        except (ProviderError, ProviderUnreachable) as exc:
            outcome.update(outcome="error", error=type(exc).__name__, message=str(exc))
            await self._notify(session_id, outcome)
            return _provider_error(fmt, exc)
        await self._notify(session_id, outcome)
        return response

    async def _embeddings(self, request: web.Request) -> web.Response:
        session_id = self._session_of(request)
        if session_id is None:
            return _error("openai", 401, "authentication_error", "invalid or missing gateway token")
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            return _error("openai", 400, "invalid_request_error", "the request body is not a JSON object")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return _error("openai", 400, "invalid_request_error", "input must be a string or an array of strings")
        model = str(body.get("model") or "")
        fmt = body.get("encoding_format") or "float"
        dimensions = body.get("dimensions")
        if not model:
            return _error("openai", 400, "invalid_request_error", "model is required")
        if fmt not in ("float", "base64"):
            return _error("openai", 400, "invalid_request_error", "encoding_format must be float or base64")
        if dimensions is not None and (not isinstance(dimensions, int) or dimensions < 1):
            return _error("openai", 400, "invalid_request_error", "dimensions must be a positive integer")
        outcome: dict[str, Any] = {"model": model, "format": "openai", "kind": "embeddings", "inputs": len(texts)}
        gw = self.gateway
        try:
            result = await gw.embed(session_id, texts, model=model, dimensions=dimensions)
        except BudgetExhausted as exc:
            outcome.update(outcome="budget_exhausted", scope=exc.scope, message=str(exc))
            await self._notify(session_id, outcome)
            return _error("openai", 402, "budget_exceeded", str(exc))
        except ConfigError as exc:
            outcome.update(outcome="error", error=type(exc).__name__, message=str(exc))
            await self._notify(session_id, outcome)
            return _error("openai", 400, "invalid_request_error", str(exc))
        except (ProviderError, ProviderUnreachable) as exc:
            outcome.update(outcome="error", error=type(exc).__name__, message=str(exc))
            await self._notify(session_id, outcome)
            return _provider_error("openai", exc)
        tokens = result.usage.input_tokens
        outcome.update(
            outcome="ok",
            model=result.model,
            usage=result.usage.to_dict(),
            cost_usd=str(result.cost_usd),
            session_tokens=gw.meter.session(session_id).total_tokens,
        )
        await self._notify(session_id, outcome)
        data = [
            {"object": "embedding", "index": i, "embedding": _encode_vector(v) if fmt == "base64" else v}
            for i, v in enumerate(result.vectors)
        ]
        doc = {
            "object": "list",
            "data": data,
            "model": result.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return web.Response(body=json.dumps(doc).encode(), content_type=_JSON)

    async def _notify(self, session_id: str, outcome: dict[str, Any]) -> None:
        if self.on_call is not None:
            await self.on_call(session_id, outcome)

    async def _pass_through(
        self,
        request: web.Request,
        slot: Any,
        provider: Any,
        fmt: str,
        body: dict[str, Any],
        model: str,
        stream: bool,
    ) -> web.StreamResponse:
        body["model"] = model
        client_wants_usage = True
        if stream and fmt == "openai":
            opts = dict(body.get("stream_options") or {})
            client_wants_usage = bool(opts.get("include_usage"))
            opts["include_usage"] = True
            body["stream_options"] = opts
        payload = json.dumps(body).encode()
        upstream = await slot.send(lambda: provider.send_raw(payload, model=model, stream=stream))
        if not stream:
            data = json.loads(upstream.content)
            usage = openai_usage(data.get("usage")) if fmt == "openai" else anthropic_usage(data.get("usage"))
            slot.charge(usage)
            return web.Response(body=upstream.content, content_type=_JSON)
        slot.streaming = True  # from here a cut stream is charged its reservation
        out = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        tap = UsageTap(fmt, drop_usage_chunk=not client_wants_usage)
        try:
            await out.prepare(request)
            async for chunk in upstream.aiter_raw():
                data = tap.feed(chunk)
                if data:
                    await out.write(data)
            tail = tap.flush()
            if tail:
                await out.write(tail)
        finally:
            await upstream.aclose()
        if tap.complete:
            slot.charge(tap.usage)
        await out.write_eof()
        return out

    async def _translate(
        self,
        request: web.Request,
        slot: Any,
        provider: ModelProvider,
        fmt: str,
        body: dict[str, Any],
        model: str,
        stream: bool,
    ) -> web.StreamResponse:
        neutral = from_openai_request(body) if fmt == "openai" else from_anthropic_request(body)
        neutral = type(neutral)(
            model=model,
            messages=neutral.messages,
            tools=neutral.tools,
            max_tokens=neutral.max_tokens,
            temperature=neutral.temperature,
        )
        answer = await slot.send(lambda: provider.complete(neutral))
        slot.charge(answer.usage)
        ident = secrets.token_hex(12)
        created = int(time.time())
        if not stream:
            if fmt == "openai":
                doc = to_openai_response(answer, completion_id=f"chatcmpl-{ident}", created=created)
            else:
                doc = to_anthropic_response(answer, message_id=f"msg_{ident}")
            return web.Response(body=json.dumps(doc).encode(), content_type=_JSON)
        if fmt == "openai":
            wants = bool((body.get("stream_options") or {}).get("include_usage"))
            events = openai_stream(answer, completion_id=f"chatcmpl-{ident}", created=created, include_usage=wants)
        else:
            events = anthropic_stream(answer, message_id=f"msg_{ident}")
        out = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await out.prepare(request)
        await out.write(b"".join(events))
        await out.write_eof()
        return out

    async def _count_tokens(self, request: web.Request) -> web.Response:
        if self._session_of(request) is None:
            return _error("anthropic", 401, "authentication_error", "invalid or missing gateway token")
        raw = await request.read()
        return web.json_response({"input_tokens": len(raw) // 4 + 16})

    async def _models(self, request: web.Request) -> web.Response:
        if self._session_of(request) is None and not self._is_admin(request):
            return _error("openai", 401, "authentication_error", "invalid or missing gateway token")
        gw = self.gateway
        names = sorted({str(getattr(gw.provider, "model", "")), *gw.routes})
        return web.json_response(
            {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "agent-fleet"} for n in names if n]}
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    # --- admin ------------------------------------------------------------------------------------

    def _is_admin(self, request: web.Request) -> bool:
        auth = request.headers.get("Authorization", "")
        return auth[:7].lower() == "bearer " and hmac.compare_digest(auth[7:].strip(), self.admin_token)

    async def _admin_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        if not self._is_admin(request):
            return _error("openai", 401, "authentication_error", "admin token required")
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error("openai", 400, "invalid_request_error", "the request body is not a JSON object")
        return body

    async def _issue(self, request: web.Request) -> web.Response:
        body = await self._admin_body(request)
        if isinstance(body, web.Response):
            return body
        session_id = str(body.get("session_id") or "")
        if not session_id:
            return _error("openai", 400, "invalid_request_error", "session_id is required")
        token = self.issue(session_id, queue=body.get("queue"))
        return web.json_response({"session_id": session_id, "token": token})

    async def _budget(self, request: web.Request) -> web.Response:
        body = await self._admin_body(request)
        if isinstance(body, web.Response):
            return body
        target = str(body.get("id") or "")
        if not target or (body.get("tokens") is None and body.get("usd") is None):
            return _error("openai", 400, "invalid_request_error", "id and tokens or usd are required")
        try:
            apply_budget_event(self.gateway, target, body)
        except (ValueError, ArithmeticError):
            return _error("openai", 400, "invalid_request_error", "tokens must be a whole number, usd a number")
        return web.json_response({"id": target, "applied": {k: body[k] for k in ("tokens", "usd") if k in body}})

    async def _stats(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return _error("openai", 401, "authentication_error", "admin token required")
        return web.json_response(self.gateway.statistics().to_dict())

    def __repr__(self) -> str:
        return f"<GatewayService {self.root_url or 'not started'}>"
