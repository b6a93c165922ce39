"""Error payloads shared by the handlers."""

from aiohttp import web


class ApiError(Exception):
    status = 400

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


def error_response(error):
    return web.json_response({"error": str(error)}, status=getattr(error, "status", 500))


def not_found(what):
    return web.json_response({"error": f"{what} not found"}, status=404)
