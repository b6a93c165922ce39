"""``agent-fleet serve``: one long-running engine for many runs and teams, with a REST API under ``/v1/``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agent_fleet.cli.common import STORE_OPTION, run_async

if TYPE_CHECKING:
    from agent_fleet.control import FleetHost

__all__ = ["register"]


def serve_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback unless TLS or --insecure)."),
    port: int = typer.Option(8700, "--port", min=0, max=65535, help="Port to listen on (0 picks a free one)."),
    store: str | None = STORE_OPTION,
    config: Path | None = typer.Option(None, "--config", help="fleet.yaml: models, budgets, queues, teams."),
    tls_cert: Path | None = typer.Option(None, "--tls-cert", help="TLS certificate (PEM)."),
    tls_key: Path | None = typer.Option(None, "--tls-key", help="TLS private key (PEM)."),
    insecure: bool = typer.Option(False, "--insecure", help="Allow plain HTTP on a non-loopback address."),
) -> None:
    """Serve the fleet: one gateway, one admission controller, one session log for every run; the live
    dashboard at / and /metrics beside the API (the admin token, when teams are configured); with the
    extra a2a, an A2A agent (its card at /.well-known/agent-card.json, JSON-RPC at /a2a)."""
    from agent_fleet.control import serve

    def ready(url: str) -> None:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()
        typer.echo(f"agent-fleet: serving on {url} (API under /v1/, OpenAPI at /openapi.json)", err=True)

    run_async(
        serve(
            host=host,
            port=port,
            store_url=store,
            config_path=str(config) if config else None,
            tls_cert=str(tls_cert) if tls_cert else None,
            tls_key=str(tls_key) if tls_key else None,
            insecure=insecure,
            on_ready=ready,
            mount=lambda app, host: _mount(app, host, str(config) if config else None),
        )
    )


def _mount(app: Any, host: FleetHost, config: str | None) -> None:
    """Beside the API: the dashboard and ``/metrics``; the A2A agent when a2a-sdk is installed."""
    from agent_fleet.integrations import a2a

    _mount_dashboard(app, host, config)
    a2a.mount(app, host)


def _mount_dashboard(app: Any, host: FleetHost, config: str | None) -> None:
    """The observe plane's dashboard and ``/metrics``, over the server's one session log."""
    from agent_fleet.cli.dashboard import _LogDesk
    from agent_fleet.observe.dashboard import FleetReader, add_routes

    log = host.engine.log
    add_routes(app, FleetReader(log, tallies=host.team_tallies), _LogDesk(log, config))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("serve")(serve_cmd)
