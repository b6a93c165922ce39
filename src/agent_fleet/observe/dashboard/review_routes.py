"""The review queue on the dashboard: its routes, over a :class:`ReviewDesk` the composition root passes in.

The dashboard never writes to the log itself; a decision goes through the desk (the supervision
plane's ``decide``, wired by the CLI or a server), which appends it as a ``review_decision`` event.

A decision is a ``POST`` that a page on another site could try to send through the user's browser: it
must carry the ``X-Fleet-Dashboard`` header (which no cross-site form can set without a CORS preflight
this server never grants) and, when the browser names an ``Origin``, come from this server's own.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from aiohttp import web

from agent_fleet.api_errors import error_response
from agent_fleet.errors import FleetError, SessionNotFound, UsageError

__all__ = ["DESK", "ReviewDesk", "add_review_routes"]

HEADER = "X-Fleet-Dashboard"


class ReviewDesk(Protocol):
    async def queue(self, run_id: str) -> dict[str, Any]:
        """``{"run_id", "counts", "items": [ReviewItem.to_dict(), ...]}`` of one run, decided items too."""

    async def decide(self, item_id: str, decision: str, note: str | None) -> dict[str, Any]:
        """Record ``approve`` or ``reject`` on an open item; ``{"item", "event"}``."""


DESK = web.AppKey("fleet_review_desk", ReviewDesk)


def _error(status: int, message: str) -> web.Response:
    return error_response(status, message)


def _failure(exc: FleetError) -> web.Response:
    if isinstance(exc, SessionNotFound):
        return _error(404, str(exc))
    if isinstance(exc, UsageError):
        return _error(400, str(exc))
    return _error(500, str(exc) or type(exc).__name__)


async def _queue(request: web.Request) -> web.Response:
    desk = request.app.get(DESK)
    if desk is None:
        return _error(404, "this dashboard has no review queue")
    try:
        return web.json_response(await desk.queue(request.match_info["run_id"]))
    except FleetError as exc:
        return _failure(exc)


def _same_site(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    return request.headers.get(HEADER) == "1" and (origin is None or origin == f"{request.scheme}://{request.host}")


async def _decide(request: web.Request) -> web.Response:
    desk = request.app.get(DESK)
    if desk is None:
        return _error(404, "this dashboard has no review queue")
    if not _same_site(request):
        return _error(403, f"a decision needs the {HEADER}: 1 header and this dashboard's own origin")
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _error(400, "the body must be JSON: {item, decision, note?}")
    if not isinstance(body, dict) or not isinstance(body.get("item"), str):
        return _error(400, "the body must be JSON: {item, decision, note?}")
    decision = body.get("decision")
    if decision not in ("approve", "reject"):
        return _error(400, f"decision must be approve or reject, got {decision!r}")
    note = body.get("note")
    if note is not None and not isinstance(note, str):
        return _error(400, "note must be text")
    try:
        return web.json_response(await desk.decide(body["item"], decision, note or None))
    except FleetError as exc:
        return _failure(exc)


def add_review_routes(app: web.Application, desk: ReviewDesk | None) -> None:
    if desk is not None:
        app[DESK] = desk
    app.router.add_get("/api/runs/{run_id}/review", _queue)
    app.router.add_post("/api/review", _decide)
