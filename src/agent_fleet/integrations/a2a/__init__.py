"""``serve`` as an A2A agent (the Agent2Agent protocol, 1.0; the official ``a2a-sdk``, extra ``a2a``).

With a2a-sdk installed, ``agent-fleet serve`` publishes its agent card at
``/.well-known/agent-card.json`` (no token) and answers A2A's JSON-RPC binding at ``POST /a2a`` (the
bearer token of ``/v1/``). One A2A task is one fleet run (:mod:`.executor`); the card advertises the
bearer scheme when teams' tokens are configured. Without the package ``serve`` runs as before, without
these routes.

Importing this package imports no part of the SDK: :func:`mount` does, when it is installed.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

    from agent_fleet.control.host import FleetHost

__all__ = ["available", "mount"]

_logger = logging.getLogger(__name__)


def available() -> bool:
    """Whether a2a-sdk is installed (its server package, not only some distribution named ``a2a``)."""
    try:
        return importlib.util.find_spec("a2a") is not None and importlib.util.find_spec("a2a.server") is not None
    except (ImportError, ValueError):
        return False


def mount(app: web.Application, host: FleetHost) -> bool:
    """Add the A2A routes to ``serve``'s app; False (one log line) when a2a-sdk is not installed."""
    if not available():
        _logger.info("A2A is off: a2a-sdk is not installed (pip install 'agent-fleet-manager[a2a]')")
        return False
    from agent_fleet.integrations.a2a.routes import add_routes

    add_routes(app, host)
    return True
