"""Model calls through the gateway service, in three client formats: OpenAI chat completions
(``openai``), Anthropic Messages (``anthropic``) and the OpenAI Responses API (``responses``).

Every call takes the in-process path (``Gateway.slot``: reserve → permit → send → meter). What goes
to the provider:

* **Same format** (chat → an OpenAI-compatible provider, Messages → an Anthropic one, Responses → a
  provider that serves ``/responses``): the client's body and headers as they came — beta headers,
  ``anthropic-version``, unknown or beta body fields, the query string (``?beta=true``) — except what
  the gateway owns: credentials, hop-by-hop and framing headers, and ``model`` when a route substituted
  it. Streams are relayed chunk by chunk as they arrive; usage is read off them on the way.
* **Responses → a chat-only provider** (vLLM, Ollama, the simulated provider): translated to chat
  completions and back, streams event by event (:mod:`agent_fleet.spend.responses`).
* **Across formats** otherwise: translated through the neutral request (tools included); a stream is
  written from the finished answer.

Output limits: no ``max_tokens`` (or ``max_completion_tokens``, ``max_output_tokens``) is added to a
request that has none; its reservation uses the model's output limit. A substituted model gets the
client's limit clamped to its own; in strict budget mode the limit is lowered to what the budget has
left (and then set, for a request that had none).

Retries: the official SDKs (and the agents built on them) retry on their own and say so with
``x-stainless-retry-count`` on every request. Such a request is sent once: an error goes back at once,
with the provider's ``retry-after``, and the client's retry is the only one. A request without the
header is retried by the gateway's policy.

A client that hangs up is let go: its request is dropped if it was still queued (nothing sent, nothing
charged), cancelled if it was on the wire (charged its reservation, as a call of unknown fate).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from agent_fleet.domain.error_kinds import ErrorKind, error_kind
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted, ClientRequestError, FleetError, ProviderError, ProviderUnreachable
from agent_fleet.spend.call import CallSlot
from agent_fleet.spend.model_routes import ModelRoutes, Target
from agent_fleet.spend.providers import ProviderTimeout
from agent_fleet.spend.providers.anthropic import anthropic_usage, from_anthropic_request, to_anthropic_response
from agent_fleet.spend.providers.openai import from_openai_request, openai_usage, to_openai_response
from agent_fleet.spend.responses import (
    ResponsesStream,
    Unsupported,
    chat_chunks,
    chat_to_response,
    responses_to_chat,
    responses_usage,
)
from agent_fleet.spend.sse import EventReader, UsageTap, anthropic_stream, openai_stream

if TYPE_CHECKING:
    from agent_fleet.spend.service import GatewayService

__all__ = ["ModelProxy", "client_limit", "error_response", "forwarded_headers"]

_JSON = "application/json"
_SSE = {"content-type": "text/event-stream", "cache-control": "no-cache"}
# Headers the gateway owns: credentials (the client holds a session token, not a provider key),
# hop-by-hop and framing headers, and the body's encoding (the gateway reads the stream's usage).
_OWNED = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "host",
        "content-length",
        "content-type",
        "accept-encoding",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
        "proxy-connection",
        "cookie",
    }
)
_NOT_RELAYED = frozenset(
    {
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "date",
        "server",
        "set-cookie",
    }
)
_LIMIT_FIELDS = {
    "openai": ("max_completion_tokens", "max_tokens"),
    "anthropic": ("max_tokens",),
    "responses": ("max_output_tokens",),
}
_PATHS = {"openai": "chat/completions", "anthropic": "messages", "responses": "responses"}


def forwarded_headers(headers: Any) -> dict[str, str]:
    """The client's headers the gateway passes on (lower-cased), with the body asked for unencoded."""
    out = {k.lower(): v for k, v in headers.items() if k.lower() not in _OWNED}
    out["accept-encoding"] = "identity"
    return out


def client_limit(body: dict[str, Any], fmt: str) -> tuple[str | None, int | None]:
    """(field, value) of the output limit the client set, or (None, None)."""
    for name in _LIMIT_FIELDS[fmt]:
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return name, value
    return None, None


def error_response(
    fmt: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None, *, code: str | None = None
) -> web.Response:
    """An error in the client's own format (``responses`` errors are OpenAI-shaped)."""
    if fmt == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "code": code or kind, "param": None}}
    return web.Response(status=status, body=json.dumps(body).encode(), content_type=_JSON, headers=headers)


def token_refusal(fmt: str) -> web.Response:
    """401 for a request without a token this gateway issued, marked not to be retried: the SDKs
    (and the CLIs built on them, Claude Code among them) would otherwise retry it for minutes."""
    headers = {"x-should-retry": "false"}
    return error_response(fmt, 401, "authentication_error", "invalid or missing gateway token", headers)


def budget_refusal(fmt: str, message: str, *, scope: str | None = None) -> web.Response:
    """402, typed by both SDKs (anthropic ``PaymentRequiredError``; openai status 402, code
    ``budget_exceeded``) and marked not to be retried: only a budget raise lets the call through.
    ``x-fleet-budget-scope`` names the account that refused (the engine's remote harness reads it)."""
    headers = {"x-should-retry": "false"}
    if scope:
        headers["x-fleet-budget-scope"] = str(scope)
    if fmt == "anthropic":
        return error_response(fmt, 402, "billing_error", message, headers)
    return error_response(fmt, 402, "budget_exceeded", message, headers, code="budget_exceeded")


def _retried(exc: BaseException) -> list[str]:
    """The kinds of the attempts the gateway retried before ``exc`` ended the call."""
    return [str(k) for k in getattr(exc, "retried", ())]


def provider_error(fmt: str, exc: FleetError) -> web.Response:
    message = str(exc)
    if isinstance(exc, ProviderError):
        headers = {"retry-after": f"{exc.retry_after:g}"} if exc.retry_after else None
        status = exc.status or 502
        anthropic = fmt == "anthropic"
        kinds = {
            ErrorKind.RATE_LIMITED: "rate_limit_error" if anthropic else "rate_limit_exceeded",
            ErrorKind.SERVER: "overloaded_error" if anthropic else "server_error",
            ErrorKind.QUOTA: "insufficient_quota",
            ErrorKind.AUTH: "authentication_error" if anthropic else "invalid_api_key",
            ErrorKind.FORBIDDEN: "permission_error" if anthropic else "permission_denied",
            ErrorKind.MODEL_NOT_FOUND: "not_found_error" if anthropic else "model_not_found",
            ErrorKind.CLIENT: "invalid_request_error",
        }
        if status == 200:  # a body the provider should not have sent: the gateway's upstream failed
            status = 502
        return error_response(fmt, status, kinds.get(error_kind(exc), "api_error"), message, headers)
    if isinstance(exc, ProviderTimeout):
        # The request may have been processed and billed (it is charged at its reservation): an SDK
        # that retried the 504 would send, and be charged for, the same work again.
        message += "; it may have been processed and is charged at its reservation: not to be retried"
        return error_response(fmt, 504, "timeout", message, {"x-should-retry": "false"})
    return error_response(fmt, 502, "api_error", message)


@dataclass(slots=True)
class _Call:
    """One client request as the gateway handles it."""

    fmt: str
    session_id: str
    body: dict[str, Any]
    target: Target
    stream: bool
    headers: dict[str, str]
    query: str
    retry: bool
    limit_field: str | None
    outcome: dict[str, Any] = field(default_factory=dict)
    notified: bool = False  # the service's observer was told of this call

    @property
    def model(self) -> str:
        return self.target.model


class ModelProxy:
    """The model endpoints of a :class:`~agent_fleet.spend.service.GatewayService`."""

    def __init__(self, service: GatewayService, routes: ModelRoutes) -> None:
        self._svc = service
        self.gateway = service.gateway
        self.routes = routes

    async def handle(self, request: web.Request, fmt: str) -> web.StreamResponse:
        session_id = self._svc.session_of(request)
        if session_id is None:
            return token_refusal(fmt)
        raw = await request.read()
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            return error_response(fmt, 400, "invalid_request_error", "the request body is not a JSON object")
        call = self._call(request, fmt, session_id, body)
        outcome = call.outcome
        try:
            response = await self._metered(request, call, len(raw))
        except BudgetExhausted as exc:
            outcome.update(outcome="budget_exhausted", scope=exc.scope, message=str(exc))
            await self._notify(call)
            return budget_refusal(fmt, str(exc), scope=exc.scope)
        except Unsupported as exc:
            outcome.update(outcome="error", error="Unsupported", message=str(exc))
            await self._notify(call)
            return error_response(fmt, 400, "invalid_request_error", str(exc))
        except (ProviderError, ProviderUnreachable) as exc:
            outcome.update(outcome="error", error=error_kind(exc), message=str(exc), retried=_retried(exc))
            await self._notify(call)
            return self._unrouted(call, exc) or provider_error(fmt, exc)
        except (asyncio.CancelledError, ConnectionError):  # the client hung up: record what it cost, let go
            outcome.setdefault("outcome", "cancelled")
            await self._notify(call)
            raise
        await self._notify(call)
        if not call.stream and not response.prepared:  # what the call was charged, for a remote harness's log
            response.headers["x-fleet-cost-usd"] = str(outcome.get("cost_usd", "0"))
        return response

    async def _notify(self, call: _Call) -> None:
        """Tell the service's observer (the CLI sessions' recorder) of the call, once."""
        if not call.notified:
            call.notified = True
            await self._svc.notify(call.session_id, call.outcome)

    async def _answered(self, call: _Call, slot: CallSlot, usage: Usage) -> None:
        """A stream's last event is in: charge its usage and record the call before the client has
        that event (a CLI that exits on it must not leave its last call unrecorded, or charged as cut)."""
        slot.charge(usage)
        call.outcome.update(cost_usd=str(slot.cost), outcome="ok", retried=slot.retried)
        call.outcome.update(session_tokens=self.gateway.meter.session(call.session_id).total_tokens)
        await self._notify(call)

    def _call(self, request: web.Request, fmt: str, session_id: str, body: dict[str, Any]) -> _Call:
        target = self.routes.resolve(str(body.get("model") or ""))
        limit_field, _ = client_limit(body, fmt)
        call = _Call(
            fmt=fmt,
            session_id=session_id,
            body=body,
            target=target,
            stream=bool(body.get("stream")),
            headers=forwarded_headers(request.headers),
            query=request.query_string,
            retry="x-stainless-retry-count" not in request.headers,
            limit_field=limit_field,
        )
        call.outcome.update(model=target.model, format=fmt, stream=call.stream)
        if target.substituted:
            body["model"] = target.model
            call.outcome.update(asked=target.asked, route=target.via)
            if self.gateway.on_route is not None and target.asked:
                self.gateway.on_route(session_id, target.to_event())
        return call

    def _unrouted(self, call: _Call, exc: BaseException) -> web.Response | None:
        """A model nobody routes that the provider says it lacks: an error that names the fix."""
        if call.target.routed or not isinstance(exc, ClientRequestError) or exc.status != 404:
            return None
        provider = getattr(call.target.provider, "name", "the default provider")
        message = (
            f"model {call.target.asked!r} is not routed by this gateway and {provider} does not serve it: "
            f"name a model it serves, or route this name in fleet.yaml (aliases: {{{call.target.asked}: MODEL}})"
        )
        kind = "not_found_error" if call.fmt == "anthropic" else "invalid_request_error"
        return error_response(call.fmt, 404, kind, message, code="model_not_found")

    async def _metered(self, request: web.Request, call: _Call, size: int) -> web.StreamResponse:
        gw = self.gateway
        limit = gw.prices.output_limit(call.model)
        asked_limit = call.body.get(call.limit_field) if call.limit_field else None
        if asked_limit is not None and call.target.substituted and asked_limit > limit:
            call.body[call.limit_field] = asked_limit = limit  # type: ignore[index]
        reserve = min(asked_limit or limit, limit)
        key = f"{call.model}#http"
        raw_estimate = size // 3 + 16  # JSON text: about 3 bytes a token or more
        prompt = gw.estimator.estimate_raw(key, raw_estimate)
        provider = call.target.provider
        async with gw.slot(
            call.session_id, model=call.model, prompt_tokens=prompt, max_tokens=reserve, provider=provider
        ) as slot:
            if slot.max_tokens < reserve:  # a strict budget: sent with what is left
                call.body[call.limit_field or self._limit_field_for(call)] = slot.max_tokens
            try:
                response = await self._route(request, call, slot)
            finally:
                call.outcome.update(cost_usd=str(slot.cost))
            if not call.notified:
                ok = slot.charged and not slot.streaming
                call.outcome.update(outcome="ok" if ok else "cut", retried=slot.retried)
                call.outcome.update(session_tokens=gw.meter.session(call.session_id).total_tokens)
        if slot.charged and slot.last_input_tokens:
            gw.estimator.observe(key, raw_estimate, slot.last_input_tokens)
        return response

    def _limit_field_for(self, call: _Call) -> str:
        if call.fmt == "openai":
            return str(getattr(call.target.provider, "max_tokens_field", "max_tokens"))
        return _LIMIT_FIELDS[call.fmt][0]

    async def _route(self, request: web.Request, call: _Call, slot: CallSlot) -> web.StreamResponse:
        provider = call.target.provider
        kind = getattr(provider, "kind", "openai")
        if hasattr(provider, "send_raw"):
            native = call.fmt == "responses" and kind == "openai" and bool(getattr(provider, "responses_api", False))
            if kind == call.fmt or native:
                return await self._same_format(request, call, slot)
            if call.fmt == "responses" and kind == "openai":
                return await self._responses_via_chat(request, call, slot)
        return await self._across_formats(request, call, slot)

    # --- same format ------------------------------------------------------------------------------

    async def _same_format(self, request: web.Request, call: _Call, slot: CallSlot) -> web.StreamResponse:
        body, fmt = call.body, call.fmt
        client_wants_usage = True
        if call.stream and fmt == "openai":
            opts = dict(body.get("stream_options") or {})
            client_wants_usage = bool(opts.get("include_usage"))
            opts["include_usage"] = True
            body["stream_options"] = opts
        payload = json.dumps(body).encode()
        path = _PATHS[fmt] + (f"?{call.query}" if call.query else "")
        provider: Any = call.target.provider

        async def send() -> Any:
            return await provider.send_raw(
                payload, model=call.model, stream=call.stream, path=path, headers=call.headers
            )

        upstream = await slot.send(send, retry=call.retry)
        headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RELAYED}
        if not call.stream:
            data = json.loads(upstream.content)
            usage = data.get("usage")
            slot.charge(
                openai_usage(usage)
                if fmt == "openai"
                else anthropic_usage(usage)
                if fmt == "anthropic"
                else responses_usage(usage)
            )
            return web.Response(body=upstream.content, headers=headers)
        tap = UsageTap(fmt, drop_usage_chunk=not client_wants_usage)
        return await self._relay(request, call, slot, upstream, tap, headers)

    async def _relay(
        self,
        request: web.Request,
        call: _Call,
        slot: CallSlot,
        upstream: Any,
        tap: UsageTap,
        headers: dict[str, str],
    ) -> web.StreamResponse:
        slot.streaming = True  # from here a cut stream is charged its reservation
        out = web.StreamResponse(headers={**headers, **_SSE})
        try:
            await out.prepare(request)
            async for chunk in upstream.aiter_raw():
                data = tap.feed(chunk)
                if tap.complete and not slot.charged:
                    await self._answered(call, slot, tap.usage)
                if data:
                    await out.write(data)
            tail = tap.flush()
            if tap.complete and not slot.charged:
                await self._answered(call, slot, tap.usage)
            if tail:
                await out.write(tail)
        finally:
            slot.received = tap.usage
            await upstream.aclose()
        await out.write_eof()
        return out

    # --- Responses in front of chat completions ------------------------------------------------------

    async def _responses_via_chat(self, request: web.Request, call: _Call, slot: CallSlot) -> web.StreamResponse:
        chat, custom = responses_to_chat(call.body)
        payload = json.dumps(chat).encode()
        provider: Any = call.target.provider

        async def send() -> Any:
            return await provider.send_raw(payload, model=call.model, stream=call.stream)

        upstream = await slot.send(send, retry=call.retry)
        if not call.stream:
            data = json.loads(upstream.content)
            slot.charge(openai_usage(data.get("usage")))
            doc = chat_to_response(data, call.body, custom=custom, model=str(data.get("model") or call.model))
            return web.json_response(doc)
        slot.streaming = True
        writer = ResponsesStream(call.body, model=call.model, created=int(time.time()), custom=custom)
        reader = EventReader()
        out = web.StreamResponse(headers=_SSE)
        done = False
        try:
            await out.prepare(request)
            await out.write(writer.start())
            async for chunk in upstream.aiter_raw():
                for data in reader.feed(chunk):
                    if data == "[DONE]":
                        done = True
                    elif isinstance(data, dict):
                        piece = writer.feed(data)
                        if piece:
                            await out.write(piece)
        finally:
            slot.received = responses_usage(writer.usage_doc)
            await upstream.aclose()
        if done and writer.usage_doc is not None:
            await self._answered(call, slot, responses_usage(writer.usage_doc))
        await out.write(writer.finish())
        await out.write_eof()
        return out

    # --- across formats (through the neutral request) -----------------------------------------------

    async def _across_formats(self, request: web.Request, call: _Call, slot: CallSlot) -> web.StreamResponse:
        fmt, body = call.fmt, call.body
        custom: set[str] = set()
        if fmt == "responses":
            chat, custom = responses_to_chat(body)
            neutral = from_openai_request(chat)
        else:
            neutral = from_openai_request(body) if fmt == "openai" else from_anthropic_request(body)
        neutral = replace(neutral, model=call.model, max_tokens=slot.max_tokens)
        provider = call.target.provider
        answer = await slot.send(lambda: provider.complete(neutral), retry=call.retry)
        slot.charge(answer.usage)
        ident = secrets.token_hex(12)
        created = int(time.time())
        if fmt == "responses":
            chat_doc = to_openai_response(answer, completion_id=f"chatcmpl-{ident}", created=created)
            if not call.stream:
                return web.json_response(chat_to_response(chat_doc, body, custom=custom, model=answer.model))
            writer = ResponsesStream(body, model=answer.model, created=created, custom=custom)
            events = [writer.start(), *(writer.feed(c) for c in chat_chunks(chat_doc)), writer.finish()]
        elif not call.stream:
            if fmt == "openai":
                doc = to_openai_response(answer, completion_id=f"chatcmpl-{ident}", created=created)
            else:
                doc = to_anthropic_response(answer, message_id=f"msg_{ident}")
            return web.json_response(doc)
        elif fmt == "openai":
            wants = bool((body.get("stream_options") or {}).get("include_usage"))
            events = openai_stream(answer, completion_id=f"chatcmpl-{ident}", created=created, include_usage=wants)
        else:
            events = anthropic_stream(answer, message_id=f"msg_{ident}")
        await self._answered(call, slot, answer.usage)  # recorded before the client reads the stream
        out = web.StreamResponse(headers=_SSE)
        await out.prepare(request)
        await out.write(b"".join(events))
        await out.write_eof()
        return out

    def __repr__(self) -> str:
        return f"<ModelProxy {self.routes!r}>"
