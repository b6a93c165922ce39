"""Entry point: builds the web application and starts serving."""

import logging

from aiohttp import web

from stockroom import config
from stockroom.api.middleware import error_middleware, timing_middleware
from stockroom.api.routes import setup_routes
from stockroom.db.connection import close_pool, open_pool
from stockroom.utils.logging_setup import configure_logging

log = logging.getLogger(__name__)


async def on_startup(app):
    app["db"] = await open_pool(config.get("db_url"))
    log.info("database pool ready")


async def on_cleanup(app):
    await close_pool(app["db"])


def create_app():
    app = web.Application(middlewares=[timing_middleware, error_middleware])
    setup_routes(app)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


def main():
    configure_logging()
    port = int(config.get("port", 8080))
    # TODO: read host from config instead of binding every interface
    web.run_app(create_app(), host="0.0.0.0", port=port)


if __name__ == "__main__":
    main()
