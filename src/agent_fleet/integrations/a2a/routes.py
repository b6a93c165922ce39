"""The A2A agent's routes in ``serve``'s aiohttp app: the card (no token) and the JSON-RPC endpoint."""

from __future__ import annotations

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.tasks import InMemoryTaskStore
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from aiohttp import web

from agent_fleet.control.api import ACCESS_KEY, TOKENS_KEY
from agent_fleet.control.host import FleetHost
from agent_fleet.integrations.a2a.card import RPC_PATH, agent_card
from agent_fleet.integrations.a2a.executor import FleetExecutor
from agent_fleet.integrations.a2a.jsonrpc import JsonRpcEndpoint

__all__ = ["add_routes"]

EXECUTOR_KEY = web.AppKey("a2a_executor", FleetExecutor)


def add_routes(app: web.Application, host: FleetHost) -> None:
    """The card at the SDK's well-known path, public; the JSON-RPC endpoint, a team path like ``/v1/``.
    Tasks are kept in memory, for the life of the server (a run itself is in the store, under its id)."""
    bearer = not app[TOKENS_KEY].open
    executor = FleetExecutor(host)
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=agent_card("", bearer=bearer)
    )
    endpoint = JsonRpcEndpoint(handler)

    async def card(request: web.Request) -> web.Response:
        return web.json_response(agent_card_to_dict(agent_card(str(request.url.origin()), bearer=bearer)))

    async def close(_app: web.Application) -> None:  # ends the open streams before the server stops
        await handler.aclose()

    access = app[ACCESS_KEY]
    access.public.add(AGENT_CARD_WELL_KNOWN_PATH)
    access.team.append(RPC_PATH)
    app[EXECUTOR_KEY] = executor
    app.router.add_get(AGENT_CARD_WELL_KNOWN_PATH, card)
    app.router.add_post(RPC_PATH, endpoint)
    app.on_shutdown.append(close)
