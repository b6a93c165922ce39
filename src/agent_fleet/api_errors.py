"""The one JSON shape of an error in every HTTP API the package serves (``serve``'s ``/v1/``, the
dashboard and its review desk, the A2A card's neighbours): ``{"error": {"type": KIND, "message": TEXT}}``,
``KIND`` one word per HTTP status unless the caller names a finer one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

__all__ = ["KINDS", "error_body", "error_response"]

KINDS = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid_request",
    500: "internal",
}


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    return {"error": {"type": kind or KINDS.get(status, "http_error"), "message": message}}


def error_response(
    status: int, message: str, *, kind: str | None = None, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response(error_body(status, message, kind), status=status, headers=headers)
