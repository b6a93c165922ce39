"""``agent-fleet mcp [--http --host H --port P] [--store URL] [--config fleet.yaml] [--model M]
[--provider P] [--embedder E] [--server URL]``: the fleet as an MCP server (stdio by default, streamable
HTTP with ``--http``); the options are the runs' settings. With ``--server`` (``$FLEET_SERVER``) the tools
act through that ``agent-fleet serve`` as the team of ``$FLEET_TOKEN``. See
:mod:`agent_fleet.integrations.mcp`."""

from __future__ import annotations

import os

import typer

from agent_fleet.cli.common import STORE_OPTION, run_async
from agent_fleet.cli.serve_client import SERVER_OPTION
from agent_fleet.errors import UsageError

__all__ = ["register"]


def mcp_cmd(
    http: bool = typer.Option(False, "--http", help="Serve streamable HTTP instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: the interface to listen on."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="With --http: the port to listen on."),
    store: str | None = STORE_OPTION,
    config: str | None = typer.Option(None, "--config", help="fleet.yaml for the runs this server starts."),
    model: str = typer.Option("gpt-4.1-mini", "--model", help="Model name the runs send to the provider."),
    provider: str | None = typer.Option(None, "--provider", help="openai, anthropic or a base URL."),
    embedder: str = typer.Option("auto", "--embedder", help="Dedup embedder of the runs: auto, lexical, minilm."),
    server: str | None = SERVER_OPTION,
) -> None:
    """The fleet as an MCP server: tools deploy, status, results, events, budget_raise, review."""

    async def go() -> None:
        try:
            from agent_fleet.integrations.mcp import serve
        except ImportError:
            raise UsageError("agent-fleet mcp needs the mcp extra: pip install 'agent-fleet-manager[mcp]'") from None

        def ready(url: str) -> None:
            typer.echo(f"agent-fleet: MCP server at {url}", err=True)

        if server is not None:
            for flag, value in (("--provider", provider), ("--config", config), ("--store", store)):
                if value is not None:
                    raise UsageError(f"{flag} is the server's to set; leave it out with --server")
            from agent_fleet.options import DEFAULT_MODEL

            shared = {"model": model if model != DEFAULT_MODEL else None, "embedder": embedder}
            token = os.environ.get("FLEET_TOKEN") or None
            await serve(http=http, host=host, port=port, defaults=shared, on_ready=ready, server=server, token=token)
            return
        defaults = {"model": model, "provider": provider, "embedder": embedder}
        await serve(http=http, host=host, port=port, store=store, config_path=config, defaults=defaults, on_ready=ready)

    if not 0 < port < 65536:
        raise typer.BadParameter(f"--port must be 1-65535, not {port}")
    run_async(go())


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("mcp")(mcp_cmd)
