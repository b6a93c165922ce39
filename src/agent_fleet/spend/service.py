"""The gateway as an HTTP service: OpenAI-compatible ``/v1/chat/completions``, ``/v1/responses`` and
``/v1/embeddings`` and Anthropic-compatible ``/v1/messages``, streaming included, in front of the
configured providers.

Each session gets its own token (:class:`SessionTokens`), good only for that session and its budget;
clients send it as their API key (``Authorization: Bearer`` or ``x-api-key``). Provider keys never
leave the process. Every model call takes the same path as an in-process call (``Gateway.slot``):
reserve → permit → send → meter; :mod:`agent_fleet.spend.proxy` says what is passed through, what is
translated, which model serves a request (:mod:`agent_fleet.spend.model_routes`) and how retries and hang-ups
are handled. A request refused by a budget gets HTTP 402 with ``x-should-retry: false`` — typed by the
SDKs (anthropic ``PaymentRequiredError``; openai ``APIStatusError`` with ``code = "budget_exceeded"``)
and not retried by them.

Embeddings go through ``Gateway.embed`` with the model the request names (a fleet.yaml name or a model
id; unrouted names go to the default provider), so they are metered and budget-stopped (402) like
chat calls; ``encoding_format`` ``float`` or ``base64`` (the OpenAI SDK's default) is honoured, and
``input`` is a string or an array of strings. A provider without an embeddings endpoint gets a 400
naming the fix.

A *harness token* (``fgh-``, :meth:`SessionTokens.issue` with ``harness=True``) is what the engine gives
its own harness when the harness runs on another machine (the Ray executor): good for the session's
model calls like any token, and for ``POST /fleet/spent`` ``{usage, cost_usd}``, which seeds what the
session had spent before (its log's figure, :meth:`Gateway.restore_spent`). CLI agents never get one.
A budget refusal names its account's scope in ``x-fleet-budget-scope``.

Admin endpoints (``Authorization: Bearer <admin token>``): ``POST /fleet/sessions`` ``{session_id,
queue?}`` → ``{token}``; ``POST /fleet/budget`` ``{id, tokens?, usd?}``; ``GET /fleet/stats`` (the
gateway's statistics and ``requests``, the count of proxied requests by outcome).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from aiohttp import web

from agent_fleet.app_server import AppServer
from agent_fleet.domain.error_kinds import error_kind
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted, ConfigError, ProviderError, ProviderUnreachable
from agent_fleet.spend.gateway import Gateway, apply_budget_event
from agent_fleet.spend.model_routes import ModelRoutes
from agent_fleet.spend.proxy import ModelProxy, budget_refusal, error_response, provider_error, token_refusal

__all__ = ["CallObserver", "GatewayService", "SessionTokens"]

CallObserver = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Called after every proxied request with (session_id, {model, outcome, usage?, cost_usd?, ...})."""

_JSON = "application/json"


class SessionTokens:
    """Per-session bearer tokens: ``fgw-<session id, base64url>.<HMAC-SHA256>``; revocable. Harness
    tokens (``fgh-``) carry a MAC of their own, so a session token cannot be turned into one."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or os.urandom(32)
        self._revoked: set[str] = set()

    def issue(self, session_id: str, *, harness: bool = False) -> str:
        self._revoked.discard(session_id)
        sid = base64.urlsafe_b64encode(session_id.encode()).decode().rstrip("=")
        prefix = "fgh" if harness else "fgw"
        return f"{prefix}-{sid}.{self._mac(session_id, prefix)}"

    def _mac(self, session_id: str, prefix: str = "fgw") -> str:
        text = session_id if prefix == "fgw" else f"{prefix}:{session_id}"
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()[:40]

    def verify(self, token: str, *, harness: bool = False) -> str | None:
        """The session id the token was issued for, or None; with ``harness``, only a harness token."""
        prefix = token[:3]
        if token[3:4] != "-" or "." not in token or prefix not in (("fgh",) if harness else ("fgw", "fgh")):
            return None
        sid, mac = token[4:].rsplit(".", 1)
        try:
            session_id = base64.urlsafe_b64decode(sid + "=" * (-len(sid) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        if not hmac.compare_digest(mac, self._mac(session_id, prefix)) or session_id in self._revoked:
            return None
        return session_id

    def revoke(self, session_id: str) -> None:
        self._revoked.add(session_id)

    def __repr__(self) -> str:
        return f"<SessionTokens revoked={len(self._revoked)}>"


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
        on_call: CallObserver | None = None,
    ) -> None:
        self.gateway = gateway
        self.tokens = tokens or SessionTokens()
        self.admin_token = admin_token or f"fga-{secrets.token_urlsafe(24)}"
        self.on_call = on_call
        self.routes = ModelRoutes(gateway, gateway.model_aliases)
        self.proxy = ModelProxy(self, self.routes)
        self.requests: Counter[str] = Counter()  # proxied requests by outcome
        # handler_cancellation: a client that hangs up cancels its request (dropped while queued,
        # cancelled on the wire), so an abandoned request never goes out later.
        self._server = AppServer(handler_cancellation=True, backlog=1024)
        self.root_url = ""

    # --- lifecycle --------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for prefix in ("/v1", ""):  # the OpenAI paths also answer on the root, for a base URL without /v1
            app.router.add_post(prefix + "/chat/completions", self._openai)
            app.router.add_post(prefix + "/responses", self._responses)
            app.router.add_post(prefix + "/embeddings", self._embeddings)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/healthz", self._health)
        app.router.add_post("/fleet/sessions", self._issue)
        app.router.add_post("/fleet/budget", self._budget)
        app.router.add_post("/fleet/spent", self._spent)
        app.router.add_get("/fleet/stats", self._stats)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve; returns the root URL (OpenAI clients use ``root + "/v1"``, Anthropic clients the root)."""
        self.root_url = await self._server.start(self.app(), host, port)
        return self.root_url

    async def aclose(self) -> None:
        """Stop serving (the gateway and its providers stay open for their owner). Safe to call twice."""
        await self._server.stop()

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

    def session_of(self, request: web.Request) -> str | None:
        """The session a request's token was issued for, or None."""
        auth = request.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("x-api-key", "")
        return self.tokens.verify(token) if token else None

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self.proxy.handle(request, "openai")

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self.proxy.handle(request, "anthropic")

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        return await self.proxy.handle(request, "responses")

    async def _embeddings(self, request: web.Request) -> web.Response:
        session_id = self.session_of(request)
        if session_id is None:
            return token_refusal("openai")
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            return error_response("openai", 400, "invalid_request_error", "the request body is not a JSON object")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return error_response(
                "openai", 400, "invalid_request_error", "input must be a string or an array of strings"
            )
        model = str(body.get("model") or "")
        fmt = body.get("encoding_format") or "float"
        dimensions = body.get("dimensions")
        if not model:
            return error_response("openai", 400, "invalid_request_error", "model is required")
        if fmt not in ("float", "base64"):
            return error_response("openai", 400, "invalid_request_error", "encoding_format must be float or base64")
        if dimensions is not None and (not isinstance(dimensions, int) or dimensions < 1):
            return error_response("openai", 400, "invalid_request_error", "dimensions must be a positive integer")
        outcome: dict[str, Any] = {"model": model, "format": "openai", "kind": "embeddings", "inputs": len(texts)}
        gw = self.gateway
        try:
            result = await gw.embed(session_id, texts, model=model, dimensions=dimensions)
        except BudgetExhausted as exc:
            outcome.update(outcome="budget_exhausted", scope=exc.scope, message=str(exc))
            await self.notify(session_id, outcome)
            return budget_refusal("openai", str(exc), scope=exc.scope)
        except ConfigError as exc:
            outcome.update(outcome="error", error=type(exc).__name__, message=str(exc))
            await self.notify(session_id, outcome)
            return error_response("openai", 400, "invalid_request_error", str(exc))
        except (ProviderError, ProviderUnreachable) as exc:
            outcome.update(outcome="error", error=error_kind(exc), message=str(exc))
            await self.notify(session_id, outcome)
            return provider_error("openai", exc)
        tokens = result.usage.input_tokens
        outcome.update(
            outcome="ok",
            model=result.model,
            usage=result.usage.to_dict(),
            cost_usd=str(result.cost_usd),
            session_tokens=gw.meter.session(session_id).total_tokens,
        )
        await self.notify(session_id, outcome)
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

    async def notify(self, session_id: str, outcome: dict[str, Any]) -> None:
        """Count a proxied request and tell the observer (``on_call``)."""
        self.requests[str(outcome.get("outcome", "unknown"))] += 1
        if self.on_call is not None:
            await self.on_call(session_id, outcome)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        if self.session_of(request) is None:
            return token_refusal("anthropic")
        raw = await request.read()
        return web.json_response({"input_tokens": len(raw) // 4 + 16})

    async def _models(self, request: web.Request) -> web.Response:
        if self.session_of(request) is None and not self._is_admin(request):
            return token_refusal("openai")
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
            return error_response("openai", 401, "authentication_error", "admin token required")
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return error_response("openai", 400, "invalid_request_error", "the request body is not a JSON object")
        return body

    async def _issue(self, request: web.Request) -> web.Response:
        body = await self._admin_body(request)
        if isinstance(body, web.Response):
            return body
        session_id = str(body.get("session_id") or "")
        if not session_id:
            return error_response("openai", 400, "invalid_request_error", "session_id is required")
        token = self.issue(session_id, queue=body.get("queue"))
        return web.json_response({"session_id": session_id, "token": token})

    async def _budget(self, request: web.Request) -> web.Response:
        body = await self._admin_body(request)
        if isinstance(body, web.Response):
            return body
        target = str(body.get("id") or "")
        if not target or (body.get("tokens") is None and body.get("usd") is None):
            return error_response("openai", 400, "invalid_request_error", "id and tokens or usd are required")
        try:
            apply_budget_event(self.gateway, target, body)
        except (ValueError, ArithmeticError):
            return error_response("openai", 400, "invalid_request_error", "tokens must be a whole number, usd a number")
        return web.json_response({"id": target, "applied": {k: body[k] for k in ("tokens", "usd") if k in body}})

    async def _spent(self, request: web.Request) -> web.Response:
        """What a session had spent before (its log's figure), from its harness on another machine."""
        auth = request.headers.get("Authorization", "")
        session_id = self.tokens.verify(auth[7:].strip(), harness=True) if auth[:7].lower() == "bearer " else None
        if session_id is None:
            return error_response("openai", 401, "authentication_error", "a harness token is required")
        try:
            body = json.loads(await request.read())
            usage = Usage.from_dict(body["usage"])
            cost = Decimal(str(body["cost_usd"]))
            if not cost.is_finite() or cost < 0 or min(usage.to_dict().values()) < 0:
                raise ValueError
        except (ValueError, TypeError, KeyError, ArithmeticError):
            return error_response("openai", 400, "invalid_request_error", "expected {usage, cost_usd}")
        self.gateway.restore_spent(session_id, usage, cost)
        return web.json_response({"session_id": session_id, "restored": True})

    async def _stats(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response("openai", 401, "authentication_error", "admin token required")
        return web.json_response({**self.gateway.statistics().to_dict(), "requests": dict(self.requests)})

    def __repr__(self) -> str:
        return f"<GatewayService {self.root_url or 'not started'}>"
