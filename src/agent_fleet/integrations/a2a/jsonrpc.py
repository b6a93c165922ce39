"""A2A's JSON-RPC binding on aiohttp, over a2a-sdk's framework-agnostic :class:`RequestHandler`.

The SDK's own binding (``a2a.server.routes.JsonRpcDispatcher``) takes and returns Starlette requests and
responses; ``serve`` is aiohttp. This module does for aiohttp what that dispatcher does for Starlette,
with the SDK's own pieces: the method table and request types (protobuf, parsed with ``ParseDict``), the
request handler (task store, active tasks, the executor), the A2A-Version check, the error objects and
their codes (``build_error_response``) and the stream events (``to_stream_response``). Streaming methods
answer Server-Sent Events, one JSON-RPC response per ``data:`` line, ``event: error`` for an error.

Errors are JSON-RPC errors with HTTP 200, as the SDK's server answers them: -32700 for a body that is
not JSON, -32600 for a request that is not JSON-RPC 2.0, -32601 for an unknown method, -32602 for bad
params, the A2A codes (-32001 task not found, ...) for the rest.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from a2a.auth.user import User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.jsonrpc_models import InternalError, JSONParseError, JSONRPCError, MethodNotFoundError
from a2a.server.request_handlers import RequestHandler, build_error_response
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils import constants, json_utils, proto_utils
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError, TaskNotFoundError
from a2a.utils.version_validator import validate_version
from aiohttp import web
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as Proto
from jsonrpc.jsonrpc2 import JSONRPC20Request, JSONRPC20Response

from agent_fleet.control.api import request_caller
from agent_fleet.control.teams import Caller

__all__ = ["CALLER_STATE", "JsonRpcEndpoint", "TeamUser"]

_logger = logging.getLogger(__name__)

CALLER_STATE = "fleet_caller"  # ServerCallContext.state: the authenticated Caller
_PASSED_HEADERS = (constants.VERSION_HEADER.lower(), HTTP_EXTENSION_HEADER.lower())  # never the token

RequestId = str | int | None
Unary = Callable[[RequestHandler, Any, ServerCallContext], Awaitable[dict[str, Any] | None]]


class TeamUser(User):
    """The caller as the SDK's ``User``: a task belongs to the token that created it (the task store is
    keyed by ``user_name``), so one team never sees another team's tasks."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return "admin" if self.caller.team is None else f"team:{self.caller.team}"


def _dict(message: Proto) -> dict[str, Any]:
    out: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=False)
    return out


def _required(result: Proto | None) -> dict[str, Any]:
    if result is None:
        raise TaskNotFoundError
    return _dict(result)


async def _send(h: RequestHandler, req: SendMessageRequest, ctx: ServerCallContext) -> dict[str, Any]:
    result = await h.on_message_send(req, ctx)
    response = SendMessageResponse(task=result) if isinstance(result, Task) else SendMessageResponse(message=result)
    return _dict(response)


async def _get(h: RequestHandler, req: GetTaskRequest, ctx: ServerCallContext) -> dict[str, Any]:
    return _required(await h.on_get_task(req, ctx))


async def _list(h: RequestHandler, req: ListTasksRequest, ctx: ServerCallContext) -> dict[str, Any]:
    return serialize_list_tasks_response(await h.on_list_tasks(req, ctx), req.include_artifacts)


async def _cancel(h: RequestHandler, req: CancelTaskRequest, ctx: ServerCallContext) -> dict[str, Any]:
    return _required(await h.on_cancel_task(req, ctx))


async def _push_set(h: RequestHandler, req: TaskPushNotificationConfig, ctx: ServerCallContext) -> dict[str, Any]:
    return _dict(await h.on_create_task_push_notification_config(req, ctx))


async def _push_get(
    h: RequestHandler, req: GetTaskPushNotificationConfigRequest, ctx: ServerCallContext
) -> dict[str, Any]:
    return _dict(await h.on_get_task_push_notification_config(req, ctx))


async def _push_list(
    h: RequestHandler, req: ListTaskPushNotificationConfigsRequest, ctx: ServerCallContext
) -> dict[str, Any]:
    return _dict(await h.on_list_task_push_notification_configs(req, ctx))


async def _push_delete(h: RequestHandler, req: DeleteTaskPushNotificationConfigRequest, ctx: ServerCallContext) -> None:
    await h.on_delete_task_push_notification_config(req, ctx)


async def _card(h: RequestHandler, req: GetExtendedAgentCardRequest, ctx: ServerCallContext) -> dict[str, Any]:
    return _dict(await h.on_get_extended_agent_card(req, ctx))


# The SDK dispatcher's table (method names are the gRPC service's): request type, and what answers it.
_UNARY: dict[str, tuple[type[Proto], Unary]] = {
    "SendMessage": (SendMessageRequest, _send),
    "GetTask": (GetTaskRequest, _get),
    "ListTasks": (ListTasksRequest, _list),
    "CancelTask": (CancelTaskRequest, _cancel),
    "CreateTaskPushNotificationConfig": (TaskPushNotificationConfig, _push_set),
    "GetTaskPushNotificationConfig": (GetTaskPushNotificationConfigRequest, _push_get),
    "ListTaskPushNotificationConfigs": (ListTaskPushNotificationConfigsRequest, _push_list),
    "DeleteTaskPushNotificationConfig": (DeleteTaskPushNotificationConfigRequest, _push_delete),
    "GetExtendedAgentCard": (GetExtendedAgentCardRequest, _card),
}
_STREAMING: dict[str, type[Proto]] = {
    "SendStreamingMessage": SendMessageRequest,
    "SubscribeToTask": SubscribeToTaskRequest,
}


@validate_version(constants.PROTOCOL_VERSION_1_0)
async def _unary(handler: RequestHandler, method: str, params: Any, context: ServerCallContext) -> Any:
    return await _UNARY[method][1](handler, params, context)


@validate_version(constants.PROTOCOL_VERSION_1_0)
async def _stream(
    handler: RequestHandler, method: str, params: Any, context: ServerCallContext
) -> AsyncGenerator[Event, None]:
    if method == "SendStreamingMessage":
        return handler.on_message_send_stream(params, context)
    return handler.on_subscribe_to_task(params, context)


def _error(request_id: RequestId, error: A2AError | JSONRPCError) -> web.Response:
    body = build_error_response(request_id, error)
    _logger.info("A2A request %s: error %s", request_id, body.get("error", {}).get("code"))
    return web.json_response(body, dumps=json_utils.dumps)


def _sse(body: dict[str, Any]) -> bytes:
    event = "event: error\n" if "error" in body else ""
    return f"{event}data: {json_utils.dumps(body)}\n\n".encode()


class JsonRpcEndpoint:
    """``POST`` handler of the JSON-RPC endpoint; the request's caller comes from ``serve``'s auth."""

    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler

    def context(self, request: web.Request, method: str, request_id: RequestId) -> ServerCallContext:
        caller = request_caller(request)
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() in _PASSED_HEADERS}
        return ServerCallContext(
            user=TeamUser(caller),
            state={"headers": headers, CALLER_STATE: caller, "method": method, "request_id": request_id},
            requested_extensions=get_requested_extensions(request.headers.getall(HTTP_EXTENSION_HEADER, [])),
        )

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return _error(None, InvalidRequestError(message="Payload too large"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            return _error(None, JSONParseError(message=str(exc)))
        request_id: RequestId = body.get("id") if isinstance(body, dict) else None
        if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
            request_id = None
        try:
            base = JSONRPC20Request.from_data(body)
        except Exception as exc:  # the json-rpc package's own validation: -32600 with its reason
            return _error(request_id, InvalidRequestError(data={"parseError": str(exc)}))
        if not isinstance(base, JSONRPC20Request):
            return _error(request_id, InvalidRequestError(message="Batch requests are not supported"))
        if body.get("jsonrpc") != "2.0" or isinstance(base._id, bool):
            return _error(request_id, InvalidRequestError(message="Invalid request: not a JSON-RPC 2.0 request"))
        method = base.method
        model = _UNARY[method][0] if method in _UNARY else _STREAMING.get(method)
        if model is None:
            return _error(request_id, MethodNotFoundError())
        try:
            params = ParseDict(body.get("params", {}), model(), ignore_unknown_fields=True)
        except Exception as exc:  # protobuf's ParseError, or a TypeError from a params that is no object
            return _error(request_id, InvalidParamsError(data={"parseError": str(exc)}))
        context = self.context(request, method, request_id)
        context.tenant = getattr(params, "tenant", "")
        try:
            if method in _STREAMING:
                return await self._streamed(request, request_id, await _stream(self.handler, method, params, context))
            result = await _unary(self.handler, method, params, context)
        except A2AError as exc:
            return _error(request_id, exc)
        except Exception as exc:
            _logger.exception("A2A %s failed", method)
            return _error(request_id, InternalError(message=str(exc)))
        return web.json_response(JSONRPC20Response(result=result, _id=request_id).data, dumps=json_utils.dumps)

    async def _streamed(
        self, request: web.Request, request_id: RequestId, stream: AsyncGenerator[Event, None]
    ) -> web.StreamResponse:
        """The first event is awaited before the stream opens, so an up-front error (no such task, a bad
        request) is one JSON-RPC error response, as the SDK's server answers it."""
        async with aclosing(stream):
            try:
                first: Event | None = await anext(stream)
            except StopAsyncIteration:
                first = None
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
            )
            await response.prepare(request)
            try:
                if first is not None:
                    await response.write(_sse(self._event(request_id, first)))
                async for event in stream:
                    await response.write(_sse(self._event(request_id, event)))
            except A2AError as exc:
                await response.write(_sse(build_error_response(request_id, exc)))
            except (ConnectionResetError, ConnectionError):
                return response  # the client went away; the task goes on (SubscribeToTask reattaches)
            except Exception as exc:
                _logger.exception("A2A stream failed")
                await response.write(_sse(build_error_response(request_id, InternalError(message=str(exc)))))
            await response.write_eof()
            return response

    @staticmethod
    def _event(request_id: RequestId, event: Event) -> dict[str, Any]:
        result = _dict(proto_utils.to_stream_response(event))
        data: dict[str, Any] = JSONRPC20Response(result=result, _id=request_id).data
        return data
