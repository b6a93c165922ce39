"""The live dashboard and ``/metrics`` of a fleet, read off the session log (:mod:`.app` lists the routes).

A server mounts :func:`dashboard_app` (or puts :func:`add_routes` on its own application) over a
:class:`FleetReader` of its store; ``agent-fleet dashboard`` runs one alone for a local store.
"""

from agent_fleet.observe.dashboard.exposition import exposition
from agent_fleet.observe.dashboard.http_app import add_routes, dashboard_app, static_root
from agent_fleet.observe.dashboard.overview import overview, run_detail
from agent_fleet.observe.dashboard.reader import FleetReader, ReaderOptions, team_of
from agent_fleet.observe.dashboard.review_routes import ReviewDesk

__all__ = [
    "FleetReader",
    "ReaderOptions",
    "ReviewDesk",
    "add_routes",
    "dashboard_app",
    "exposition",
    "overview",
    "run_detail",
    "static_root",
    "team_of",
]
