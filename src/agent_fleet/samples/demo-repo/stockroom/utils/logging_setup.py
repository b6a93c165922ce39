"""Logging configuration."""

import logging
import os

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging(level=None):
    level = level or os.environ.get("STOCKROOM_LOG_LEVEL", "INFO")
    logging.basicConfig(level=level, format=FORMAT)
    # TODO: structured JSON logs in production
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
