"""``agent-fleet dashboard``: the live dashboard and ``/metrics`` of a local store.

It reads the session log only, so runs that other processes drive (``deploy``, ``resume``) show live.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from agent_fleet.cli.common import STORE_OPTION, die, run_async
from agent_fleet.errors import UsageError

if TYPE_CHECKING:
    from agent_fleet.session.port import SessionLog

__all__ = ["register"]


class _LogDesk:
    """The review queue of the store's runs, through the supervision plane (as ``agent-fleet review``)."""

    def __init__(self, log: SessionLog, config: str | None) -> None:
        self._log = log
        self._config = config

    async def queue(self, run_id: str) -> dict[str, Any]:
        from agent_fleet.supervise import load_review, queue_counts, run_policy

        items = await load_review(self._log, run_id, await run_policy(self._log, run_id, self._config))
        return {"run_id": run_id, "counts": queue_counts(items), "items": [i.to_dict() for i in items]}

    async def decide(self, item_id: str, decision: str, note: str | None) -> dict[str, Any]:
        from agent_fleet.supervise import Decision, decide, run_of_item, run_policy

        run_id = run_of_item(item_id)
        if run_id is None:
            raise UsageError(f"{item_id!r} is not a review item id (KIND:SUBJECT)")
        policy = await run_policy(self._log, run_id, self._config)
        item, event = await decide(self._log, item_id, Decision(decision), note, policy)
        return {"item": item.to_dict(), "event": event.to_dict()}


def dashboard_cmd(
    store: str | None = STORE_OPTION,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8700, "--port", min=0, max=65535, help="Port to listen on (0 picks a free one)."),
    near_budget: float = typer.Option(
        0.8, "--near-budget", help="fleet_sessions_near_budget counts live sessions that spent this share or more."
    ),
    top_k: int = typer.Option(20, "--top-k", help="Sessions exported in fleet_session_budget_used_ratio."),
    runs: int = typer.Option(50, "--runs", help="Newest runs followed."),
    config: str | None = typer.Option(None, "--config", help="fleet.yaml whose supervision: thresholds apply."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in a browser."),
    as_json: bool = typer.Option(False, "--json", help="Print the URLs as one JSON line."),
) -> None:
    """Serve a live dashboard (and /metrics) of the runs in a store, updating as they go."""
    if not 0 < near_budget <= 10:
        raise typer.BadParameter("must be a share above 0 (0.8 is 80%)", param_hint="--near-budget")
    if top_k < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="--top-k")
    if runs < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--runs")
    if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127."):
        # The page shows every run's task, events and spend: it stays on loopback.
        die(f"--host {host}: the dashboard listens on loopback only (127.0.0.1 or ::1)", UsageError.exit_code)

    async def serve() -> None:
        import asyncio

        from agent_fleet.app_server import AppServer
        from agent_fleet.observe.dashboard import FleetReader, ReaderOptions, dashboard_app
        from agent_fleet.session.store import open_store, resolve_store_url

        log = open_store(resolve_store_url(store))
        async with log:
            reader = FleetReader(log, options=ReaderOptions(near_budget=near_budget, top_k=top_k, runs=runs))
            server = AppServer()
            await server.start(dashboard_app(reader, _LogDesk(log, config)), host, port)
            try:
                url = f"http://{'[' + host + ']' if ':' in host else host}:{server.port}/"
                if as_json:
                    sys.stdout.write(json.dumps({"url": url, "metrics_url": url + "metrics"}) + "\n")
                else:
                    typer.echo(f"dashboard: {url}")
                    typer.echo(f"metrics:   {url}metrics")
                sys.stdout.flush()
                if open_browser:
                    import webbrowser

                    webbrowser.open(url)
                await asyncio.Event().wait()
            finally:
                await server.stop()

    run_async(serve())


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("dashboard")(dashboard_cmd)
