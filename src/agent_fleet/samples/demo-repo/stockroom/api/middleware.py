"""Request middlewares: timing and uniform JSON errors."""

import logging
import time

from aiohttp import web

log = logging.getLogger(__name__)


@web.middleware
async def timing_middleware(request, handler):
    started = time.monotonic()
    response = await handler(request)
    elapsed_ms = (time.monotonic() - started) * 1000
    response.headers["X-Elapsed-Ms"] = f"{elapsed_ms:.1f}"
    return response


@web.middleware
async def error_middleware(request, handler):
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("unhandled error on %s", request.path)
        return web.json_response({"error": "internal error"}, status=500)
