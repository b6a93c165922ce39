"""The dashboard's HTTP surface: an aiohttp application a server mounts, or runs alone.

Routes (relative to where it is mounted; the page uses relative URLs, so a prefix works):

* ``GET /`` the page, ``GET /static/…`` its assets (shipped in the package, nothing from a CDN)
* ``GET /metrics`` Prometheus text (:mod:`.exposition`)
* ``GET /api/overview`` the fleet overview with its time series; ``GET /api/runs/{run}`` a run and its
  sessions; ``GET /api/sessions/{session}/events?after=SEQ`` a session's events
* ``GET /api/stream[?run=RUN]`` Server-Sent Events: ``overview`` (and ``run`` when asked) on every refresh
* ``GET /api/sessions/{session}/stream?after=SEQ`` Server-Sent Events: ``events``, each batch of new events
* ``GET /api/runs/{run}/review`` a run's review queue; ``POST /api/review`` ``{item, decision, note?}``
  records a decision (with a :class:`~.review.ReviewDesk`; :mod:`.review` says how it is guarded)

Errors are the one JSON shape of :mod:`agent_fleet.api_errors`: ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from agent_fleet.api_errors import error_body, error_response
from agent_fleet.observe.dashboard.exposition import exposition
from agent_fleet.observe.dashboard.overview import overview, run_detail
from agent_fleet.observe.dashboard.reader import FleetReader
from agent_fleet.observe.dashboard.review_routes import ReviewDesk, add_review_routes

__all__ = ["READER", "add_routes", "dashboard_app", "static_root"]

READER = web.AppKey("fleet_reader", FleetReader)
_CLOSING = web.AppKey("fleet_dashboard_closing", asyncio.Event)  # set on shutdown: live streams end
_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


def static_root() -> Path:
    """The folder of the page and its assets inside the installed package."""
    return Path(str(resources.files("agent_fleet.observe.dashboard") / "static"))


def _error(status: int, message: str) -> web.Response:
    return error_response(status, message)


def _after(request: web.Request) -> int:
    raw = request.query.get("after", "0")
    if not raw.isdigit():
        raise web.HTTPBadRequest(
            text=json.dumps(error_body(400, f"after must be a whole number, got {raw!r}")),
            content_type="application/json",
        )
    return int(raw)


async def _index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(static_root() / "index.html", headers={"Cache-Control": "no-cache"})


async def _metrics(request: web.Request) -> web.Response:
    reader = request.app[READER]
    await reader.refresh()
    return web.Response(body=exposition(reader), headers={"Content-Type": _PROMETHEUS})


async def _overview(request: web.Request) -> web.Response:
    reader = request.app[READER]
    await reader.refresh()
    return web.json_response(overview(reader))


async def _run(request: web.Request) -> web.Response:
    reader = request.app[READER]
    await reader.refresh()
    detail = run_detail(reader, request.match_info["run_id"])
    if detail is None:
        return _error(404, f"no run {request.match_info['run_id']!r} among the newest {reader.options.runs}")
    return web.json_response(detail)


async def _events(request: web.Request) -> web.Response:
    reader = request.app[READER]
    sid = request.match_info["session_id"]
    if await reader.log.get_session(sid) is None:
        return _error(404, f"no session {sid!r}")
    return web.json_response({"session_id": sid, "events": await reader.session_events(sid, _after(request))})


async def _sse(request: web.Request, produce: Callable[[web.StreamResponse], Awaitable[None]]) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    try:
        await produce(response)
    except (ConnectionResetError, ConnectionError):
        pass  # the page went away
    return response


async def _pause(request: web.Request, response: web.StreamResponse) -> bool:
    """Wait one interval; False once the server shuts down. A comment line each time finds a page
    that went away (the write fails) even when there is nothing new to send."""
    reader = request.app[READER]
    await response.write(b": -\n\n")
    await reader.clock.sleep(reader.options.interval)
    return not request.app[_CLOSING].is_set()


async def _send(response: web.StreamResponse, event: str, data: Any) -> None:
    await response.write(f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode())


async def _stream(request: web.Request) -> web.StreamResponse:
    reader = request.app[READER]
    run_id = request.query.get("run")

    async def produce(response: web.StreamResponse) -> None:
        first = True
        while True:
            await reader.refresh()
            await _send(response, "overview", overview(reader, series=first))
            first = False
            if run_id:
                detail = run_detail(reader, run_id)
                if detail is not None:
                    await _send(response, "run", detail)
            if not await _pause(request, response):
                return

    return await _sse(request, produce)


async def _session_stream(request: web.Request) -> web.StreamResponse:
    reader = request.app[READER]
    sid = request.match_info["session_id"]
    if await reader.log.get_session(sid) is None:
        return _error(404, f"no session {sid!r}")
    after = _after(request)

    async def produce(response: web.StreamResponse) -> None:
        nonlocal after
        await _send(response, "events", [])  # the stream is open
        while True:
            batch = await reader.session_events(sid, after)
            if batch:
                after = batch[-1]["seq"]
                await _send(response, "events", batch)
            if not await _pause(request, response):
                return

    return await _sse(request, produce)


@web.middleware
async def _json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.content_type == "application/json":
            raise
        return _error(exc.status, exc.reason)


def add_routes(app: web.Application, reader: FleetReader, review: ReviewDesk | None = None) -> None:
    """Put the dashboard's routes on ``app`` (a server's root application, or its own); with ``review``,
    the review queue's too (:mod:`.review`)."""
    app[READER] = reader
    app[_CLOSING] = closing = asyncio.Event()

    async def on_shutdown(_: web.Application) -> None:
        closing.set()

    app.on_shutdown.append(on_shutdown)
    app.router.add_get("/", _index)
    app.router.add_static("/static/", static_root(), append_version=False)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/api/overview", _overview)
    app.router.add_get("/api/stream", _stream)
    app.router.add_get("/api/runs/{run_id}", _run)
    app.router.add_get("/api/sessions/{session_id}/events", _events)
    app.router.add_get("/api/sessions/{session_id}/stream", _session_stream)
    add_review_routes(app, review)


def dashboard_app(reader: FleetReader, review: ReviewDesk | None = None) -> web.Application:
    """The dashboard as an application of its own: run it, or ``parent.add_subapp("/dash/", it)``."""
    app = web.Application(middlewares=[_json_errors])
    add_routes(app, reader, review)
    return app
