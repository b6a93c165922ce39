"""The control plane of ``agent-fleet serve``: one engine hosting many runs, teams, the REST API.

This package sits with the engine (the composition root): it wires the one store, gateway and
admission controller that every run of the server shares.
"""

from agent_fleet.control.api import build_app
from agent_fleet.control.host import FleetHost, RunConflict
from agent_fleet.control.schema import BudgetRaise, RunCreate, openapi_document
from agent_fleet.control.server import check_address, serve
from agent_fleet.control.teams import ADMIN_TOKEN_ENV, Caller, TeamTokens

__all__ = [
    "ADMIN_TOKEN_ENV",
    "BudgetRaise",
    "Caller",
    "FleetHost",
    "RunConflict",
    "RunCreate",
    "TeamTokens",
    "build_app",
    "check_address",
    "openapi_document",
    "serve",
]
