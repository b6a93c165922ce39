"""The REST API of ``agent-fleet serve`` (aiohttp), under ``/v1/``; ``/openapi.json`` describes it.

Every request to ``/v1/`` names its caller with a bearer token (:mod:`agent_fleet.control.teams`). A
team sees only its own runs: another team's run is a 404, exactly as a run that does not exist. Every
error is one JSON shape, ``{"error": {"type", "message"}}``; an unexpected one is logged here and
answered as ``internal`` without its traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from agent_fleet.api_errors import KINDS
from agent_fleet.api_errors import error_response as json_error
from agent_fleet.control.host import FleetHost, RunConflict
from agent_fleet.control.schema import BudgetRaise, RunCreate, openapi_document
from agent_fleet.control.teams import Caller, TeamTokens
from agent_fleet.control.views import run_detail, run_results, run_row
from agent_fleet.domain.events import EventType
from agent_fleet.engine import load_run, run_changes_view
from agent_fleet.errors import FleetError, Refused, RunOwned, SessionNotFound
from agent_fleet.options import RunOptions, budget_event_data

__all__ = ["ACCESS_KEY", "HOST_KEY", "TOKENS_KEY", "Access", "Mount", "build_app", "request_caller"]

_logger = logging.getLogger(__name__)


@dataclass
class Access:
    """Which paths take no token (``public``) and which a team's token, like ``/v1/`` (``team``, path
    prefixes); every other path takes the admin's. A mount adds its own before the server starts."""

    public: set[str] = field(default_factory=lambda: {"/openapi.json"})
    team: list[str] = field(default_factory=lambda: ["/v1/"])


HOST_KEY = web.AppKey("fleet_host", FleetHost)
TOKENS_KEY = web.AppKey("fleet_tokens", TeamTokens)
ACCESS_KEY = web.AppKey("fleet_access", Access)
_TOKENS = TOKENS_KEY
_CALLER = "fleet_caller"
_MAX_LIMIT = 10_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def error_response(status: int, kind: str, message: str) -> web.Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return json_error(status, message, kind=kind, headers=headers)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.kind, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, KINDS.get(exc.status, "http_error"), exc.reason)
    except SessionNotFound as exc:
        return error_response(404, "not_found", str(exc))
    except (RunConflict, RunOwned) as exc:
        return error_response(409, "conflict", str(exc))
    except Refused as exc:
        return error_response(403, "forbidden", str(exc))
    except FleetError as exc:
        return error_response(400, "invalid_request", str(exc))
    except Exception:
        _logger.exception("%s %s failed", request.method, request.path)
        return error_response(500, "internal", "internal error")


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``/v1/`` (and the team paths of :class:`Access`): a team's or the admin's token. Everything else
    mounted beside it (the dashboard, ``/metrics``) shows every team's runs: the admin's token only, as a
    bearer or as a browser's Basic password."""
    access = request.app[ACCESS_KEY]
    if request.path in access.public:
        return await handler(request)
    caller = request.app[_TOKENS].identify(request.headers.get("Authorization"))
    if request.path.startswith(tuple(access.team)):
        if caller is None:
            raise ApiError(401, "unauthorized", "a valid bearer token is required")
        request[_CALLER] = caller
    elif caller is None or not caller.admin:
        return json_error(
            401,
            "the admin token is required",
            headers={"WWW-Authenticate": 'Basic realm="agent-fleet", charset="UTF-8"'},
        )
    return await handler(request)


def request_caller(request: web.Request) -> Caller:
    """The caller a team path's request was authenticated as (see :class:`Access`)."""
    caller: Caller = request[_CALLER]
    return caller


_caller = request_caller


_MAX_INT = 2**63 - 1


async def _body(request: web.Request, model: type[BaseModel]) -> Any:
    try:
        data = json.loads(await request.read() or b"null")
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_request", "the body is not JSON") from None
    except RecursionError:  # arrays or objects nested deeper than the parser goes: no request of ours
        raise ApiError(400, "invalid_request", "the body is nested too deeply") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        raise ApiError(422, "invalid_request", f"{where}: {err.get('msg', 'invalid')}") from None


def _int(request: web.Request, name: str, default: int, minimum: int = 0) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_request", f"{name}: must be an integer") from None
    if value < minimum:
        raise ApiError(400, "invalid_request", f"{name}: must be at least {minimum}")
    return min(value, _MAX_INT)  # beyond the store's 64-bit integers every position is past the end


async def _visible_run(request: web.Request) -> tuple[str, RunOptions]:
    """The run of the path, if the caller may see it (a run of another team is not found)."""
    run_id = request.match_info["run_id"]
    host = request.app[HOST_KEY]
    try:
        options, _plan = await load_run(host.engine.log, run_id)
    except FleetError:
        options = None
    if options is None or not _caller(request).may_see(options.team):
        raise ApiError(404, "not_found", f"no run {run_id!r}")
    return run_id, options


# -- handlers -------------------------------------------------------------------------------------
async def _openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def _list_runs(request: web.Request) -> web.Response:
    host = request.app[HOST_KEY]
    caller = _caller(request)
    rows = []
    live = host.live_runs()  # before the records are read (see run_row)
    for rec in await host.engine.log.list_runs(limit=1000):
        try:
            options, _ = await load_run(host.engine.log, rec.session_id)
        except FleetError:
            continue
        if caller.may_see(options.team):
            rows.append(run_row(host, rec, options, live=rec.session_id in live))
    return web.json_response({"runs": rows})


async def _create_run(request: web.Request) -> web.Response:
    host = request.app[HOST_KEY]
    body: RunCreate = await _body(request, RunCreate)
    run_id = await host.submit(body.options(), _caller(request), items=body.items)
    return web.json_response({"run_id": run_id, "status": "running"}, status=202)


async def _get_run(request: web.Request) -> web.Response:
    run_id, options = await _visible_run(request)
    return web.json_response(await run_detail(request.app[HOST_KEY], run_id, options))


async def _events(request: web.Request) -> web.Response:
    run_id, _ = await _visible_run(request)
    log = request.app[HOST_KEY].engine.log
    stream = request.query.get("session") or run_id
    if stream != run_id and not stream.startswith(run_id + "."):
        raise ApiError(404, "not_found", f"no session {stream!r} in run {run_id}")
    if await log.get_session(stream) is None:
        raise ApiError(404, "not_found", f"no session {stream!r} in run {run_id}")
    after = _int(request, "after", 0)
    limit = min(_int(request, "limit", 1000, 1), _MAX_LIMIT)
    events = [e.to_dict() for e in await log.get_events(stream, after=after)][:limit]
    return web.json_response({"session_id": stream, "events": events})


async def _results(request: web.Request) -> web.Response:
    run_id, options = await _visible_run(request)
    offset = _int(request, "offset", 0)
    limit = min(_int(request, "limit", 1000, 1), _MAX_LIMIT)
    return web.json_response(await run_results(request.app[HOST_KEY], run_id, options, offset, limit))


async def _changes(request: web.Request) -> web.Response:
    run_id, _ = await _visible_run(request)
    return web.json_response(await run_changes_view(request.app[HOST_KEY].engine.log, run_id))


async def _budget(request: web.Request) -> web.Response:
    run_id, _ = await _visible_run(request)
    host = request.app[HOST_KEY]
    body: BudgetRaise = await _body(request, BudgetRaise)
    data = budget_event_data(body.tokens, body.usd)
    log = host.engine.log
    target = body.session_id or run_id
    if target != run_id:
        if not target.startswith(run_id + ".") or await log.get_session(target) is None:
            raise ApiError(404, "not_found", f"no session {target!r} in run {run_id}")
        host.engine.gateway.set_session_budget(target, tokens=data.get("tokens"), usd=data.get("usd"))
    else:
        host.run_budget_raise(run_id, [s.session_id for s in await log.list_sessions(run_id)], data)
    event = await log.emit_event(target, EventType.BUDGET_RAISED, data)
    return web.json_response(event.to_dict())


async def _cancel(request: web.Request) -> web.Response:
    run_id, _ = await _visible_run(request)
    request.app[HOST_KEY].cancel(run_id)
    return web.json_response({"run_id": run_id, "status": "cancelling"}, status=202)


async def _resume(request: web.Request) -> web.Response:
    run_id, _ = await _visible_run(request)
    await request.app[HOST_KEY].resume(run_id)
    return web.json_response({"run_id": run_id, "status": "running"}, status=202)


async def _queues(request: web.Request) -> web.Response:
    host = request.app[HOST_KEY]
    caller = _caller(request)
    snapshot = host.controller.snapshot()
    if not caller.admin and caller.queues:
        objects = host.controller.objects
        mine = {lq.cluster_queue for q in caller.queues if (lq := objects.resolve_local_queue(q)) is not None}
        snapshot["cluster_queues"] = [row for row in snapshot["cluster_queues"] if row["name"] in mine]
    return web.json_response(snapshot)


async def _teams(request: web.Request) -> web.Response:
    """The caller's team (the admin: every team) and what it has spent, every call of all its runs."""
    host = request.app[HOST_KEY]
    caller = _caller(request)
    names = sorted(host.config.teams) if caller.admin else [t for t in [caller.team] if t is not None]
    return web.json_response({"teams": [host.team_figures(name) for name in names]})


Mount = Callable[[web.Application, FleetHost], None]


def build_app(host: FleetHost, tokens: TeamTokens, *, mount: Mount | None = None) -> web.Application:
    """The API app. ``mount(app, host)`` adds routes beside ``/v1/`` (the dashboard at ``/``, ``/metrics``)."""
    app = web.Application(middlewares=[_errors, _auth], client_max_size=1024 * 1024)
    app[HOST_KEY] = host
    app[_TOKENS] = tokens
    app[ACCESS_KEY] = Access()
    app.router.add_get("/openapi.json", _openapi)
    app.router.add_get("/v1/runs", _list_runs)
    app.router.add_post("/v1/runs", _create_run)
    app.router.add_get("/v1/runs/{run_id}", _get_run)
    app.router.add_get("/v1/runs/{run_id}/events", _events)
    app.router.add_get("/v1/runs/{run_id}/results", _results)
    app.router.add_get("/v1/runs/{run_id}/changes", _changes)
    app.router.add_post("/v1/runs/{run_id}/budget", _budget)
    app.router.add_post("/v1/runs/{run_id}/cancel", _cancel)
    app.router.add_post("/v1/runs/{run_id}/resume", _resume)
    app.router.add_get("/v1/queues", _queues)
    app.router.add_get("/v1/teams", _teams)
    if mount is not None:  # the observe plane's app (dashboard, /metrics) goes here
        mount(app, host)
    return app
