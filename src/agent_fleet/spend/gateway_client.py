"""The gateway as a harness on another machine sees it: a client of the one gateway service.

A harness that runs on a cluster node (the Ray executor) holds no provider key and no budget state:
its :class:`RemoteGateway` sends every model call to the run's gateway service
(:mod:`agent_fleet.spend.service`) over HTTP, in the OpenAI chat-completions format, with the
session's *harness token*. So the concurrency cap, the adaptive limit and every budget stay where
they are enforced for the whole fleet: in the one gateway.

* A budget refusal (HTTP 402 with ``x-fleet-budget-scope``) is :class:`~agent_fleet.errors.BudgetExhausted`
  with that scope: the harness pauses the session, as with an in-process gateway.
* Other errors map as for any OpenAI-compatible provider. The client never retries: the gateway
  service already retried by its policy (the request carries no SDK retry header).
* ``restore_spent`` (the log's figure of what the session spent before) is sent to the service
  (``POST /fleet/spent``) before the session's next call; nothing is sent for a session that has
  spent nothing yet.
* ``unanswered_charge`` is priced here, with the run's price table (fleet.yaml ``prices``/``models``
  and the offline list prices): the figure is written to the session's log and reaches the gateway
  through ``restore_spent``, so the log and the gateway agree on it.

One :class:`GatewayClient` (one connection pool) serves every session of a node's worker;
:meth:`GatewayClient.session` gives the per-session view.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal

import aiohttp

from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted
from agent_fleet.spend.estimate import PromptEstimator
from agent_fleet.spend.prices import PriceTable
from agent_fleet.spend.providers._wire import answer_of, connection_error, error_from_status, host_of
from agent_fleet.spend.providers.openai import openai_body, openai_response

__all__ = ["GatewayClient", "RemoteGateway"]

_ZERO = Decimal(0)


class GatewayClient:
    """One node's connection pool to the gateway service at ``root_url``; opened on first use."""

    def __init__(
        self,
        root_url: str,
        *,
        prices: PriceTable | None = None,
        aliases: Mapping[str, str] | None = None,
        default_model: str = "",
        timeout: float = 600.0,
        max_connections: int = 1024,
    ) -> None:
        self.root_url = root_url.rstrip("/")
        self.host = host_of(self.root_url)
        self.prices = prices or PriceTable()
        self.aliases = dict(aliases or {})  # fleet.yaml model names -> model ids, for pricing
        self.default_model = default_model
        self.estimator = PromptEstimator()
        self._timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(timeout, 10.0))
        self._max = max_connections
        self._http: aiohttp.ClientSession | None = None

    def session(self, token: str) -> RemoteGateway:
        """The gateway as one session's harness sees it (``token``: the session's harness token)."""
        return RemoteGateway(self, token)

    def _open(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            connector = aiohttp.TCPConnector(limit=self._max, limit_per_host=self._max, keepalive_timeout=30)
            self._http = aiohttp.ClientSession(timeout=self._timeout, connector=connector, trust_env=False)
        return self._http

    async def post(self, path: str, payload: bytes, token: str) -> tuple[bytes, str | None]:
        """The answer's body and what the gateway charged for it (``x-fleet-cost-usd``)."""
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        try:
            async with self._open().post(self.root_url + path, data=payload, headers=headers) as response:
                body = await response.read()
                status, answer = response.status, response.headers
        except aiohttp.ClientConnectorError as exc:
            raise connection_error(self.host, timed_out=False, sent=False, cause=type(exc).__name__) from None
        except TimeoutError as exc:
            raise connection_error(self.host, timed_out=True, sent=True, cause=type(exc).__name__) from None
        except aiohttp.ClientError as exc:
            raise connection_error(self.host, timed_out=False, sent=True, cause=type(exc).__name__) from None
        if status == 402 and "x-fleet-budget-scope" in answer:
            message = json.loads(body).get("error", {}).get("message", "") if body else ""
            raise BudgetExhausted(str(message) or "budget exhausted", scope=answer["x-fleet-budget-scope"])
        if status >= 400:
            raise error_from_status(self.host, status, answer, body, scrub=token)
        return body, answer.get("x-fleet-cost-usd")

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        model = self.aliases.get(request.model, request.model) or self.default_model
        _, prompt = self.estimator.estimate(model, request)
        out = min(request.max_tokens, self.prices.output_limit(model))
        return Usage(prompt, out), self.prices.worst_case(model, prompt, out)

    async def aclose(self) -> None:
        if self._http is not None and not self._http.closed:
            await self._http.close()

    def __repr__(self) -> str:
        return f"<GatewayClient {self.root_url}>"


class RemoteGateway:
    """:class:`~agent_fleet.spend.port.ModelGateway` for one session, through the gateway service."""

    def __init__(self, client: GatewayClient, token: str) -> None:
        self._client = client
        self._token = token
        self._restore: tuple[Usage, Decimal] | None = None

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        if self._restore is not None:
            usage, spent = self._restore
            doc = {"usage": usage.to_dict(), "cost_usd": str(spent)}
            await self._client.post("/fleet/spent", json.dumps(doc).encode(), self._token)
            self._restore = None
        model = request.model or self._client.default_model
        payload = json.dumps(openai_body(request, model)).encode()
        body, charged = await self._client.post("/v1/chat/completions", payload, self._token)
        answer = answer_of(self._client.host, body, api="an OpenAI chat completion", key="choices")
        response = openai_response(answer, model)
        return response if charged is None else replace(response, cost_usd=Decimal(charged))

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        if usage.total_tokens or cost_usd != _ZERO or self._restore is not None:
            self._restore = (usage, Decimal(cost_usd))

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        return self._client.unanswered_charge(request)

    def __repr__(self) -> str:
        return f"<RemoteGateway via {self._client.root_url}>"
