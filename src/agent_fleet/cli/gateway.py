"""``agent-fleet gateway``: serve the metered, budgeted, rate-limited gateway over HTTP.

Clients use ``OPENAI_BASE_URL=http://HOST:PORT/v1`` or ``ANTHROPIC_BASE_URL=http://HOST:PORT`` with a
session token as their API key. Tokens come from ``--session ID`` (printed at start) or from
``POST /fleet/sessions`` with the admin token. Provider keys stay in this process. A model is served
as asked unless fleet.yaml ``models:``/``aliases:`` or ``--alias ASKED=MODEL`` route it
(:mod:`agent_fleet.spend.model_routes`).
"""

from __future__ import annotations

import json
import os
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

import typer

from agent_fleet.cli.common import run_async
from agent_fleet.errors import UsageError

__all__ = ["register"]


def _usd(value: str | None, flag: str) -> Decimal | None:
    if value is None:
        return None
    try:
        d = Decimal(value.strip().lstrip("$"))
    except InvalidOperation:
        raise UsageError(f"{flag} must be a number of dollars, not {value!r}") from None
    if not d.is_finite() or d < 0:
        raise UsageError(f"{flag} must be a positive number of dollars")
    return d


def gateway_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8787, "--port", min=0, max=65535, help="Port to listen on (0 picks a free one)."),
    provider: str | None = typer.Option(None, "--provider", help="openai, anthropic or a base URL."),
    model: str | None = typer.Option(None, "--model", help="Default model."),
    config: Path | None = typer.Option(None, "--config", help="fleet.yaml: models, budgets, rate limits."),
    budget_tokens: int | None = typer.Option(None, "--budget-tokens", help="Per-session token cap."),
    budget_usd: str | None = typer.Option(None, "--budget-usd", help="Per-session dollar cap (list prices)."),
    fleet_budget_usd: str | None = typer.Option(None, "--fleet-budget-usd", help="Dollar cap for all sessions."),
    max_concurrency: int | None = typer.Option(None, "--max-concurrency", help="API concurrency baseline."),
    sessions: list[str] = typer.Option([], "--session", help="Issue a token for this session id (repeatable)."),
    aliases: list[str] = typer.Option(
        [], "--alias", help="ASKED=MODEL: serve what clients ask for (a name or pattern) with MODEL (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the URLs and tokens as one JSON line."),
) -> None:
    """Serve OpenAI- and Anthropic-compatible endpoints in front of the configured providers."""
    import asyncio

    from agent_fleet.config import load_config
    from agent_fleet.spend.factory import build_gateway
    from agent_fleet.spend.service import GatewayService

    if budget_tokens is not None and budget_tokens < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--budget-tokens")
    if max_concurrency is not None and max_concurrency < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--max-concurrency")
    table: dict[str, str] = {}
    for spec in aliases:
        asked, sep, target = spec.partition("=")
        if not sep or not asked.strip() or not target.strip():
            raise typer.BadParameter(f"expected ASKED=MODEL, not {spec!r}", param_hint="--alias")
        table[asked.strip()] = target.strip()

    async def serve() -> None:
        cfg = load_config(config)
        gateway = build_gateway(
            cfg,
            provider=provider,
            model=model,
            session_tokens=budget_tokens if budget_tokens is not None else cfg.budgets.session_tokens,
            session_usd=_usd(budget_usd, "--budget-usd"),
            fleet_usd=_usd(fleet_budget_usd, "--fleet-budget-usd"),
            concurrency=max_concurrency,
        )
        gateway.model_aliases.update(table)
        service = GatewayService(gateway, admin_token=os.environ.get("FLEET_GATEWAY_ADMIN_TOKEN") or None)
        try:
            root = await service.start(host, port)
            tokens = {sid: service.issue(sid) for sid in sessions}
            info = {"openai_base_url": root + "/v1", "anthropic_base_url": root, "admin_token": service.admin_token}
            if as_json:
                sys.stdout.write(json.dumps({**info, "sessions": tokens}) + "\n")
            else:
                typer.echo(f"OPENAI_BASE_URL={root}/v1")
                typer.echo(f"ANTHROPIC_BASE_URL={root}")
                typer.echo(f"admin token: {service.admin_token}")
                for sid, tok in tokens.items():
                    typer.echo(f"session {sid}: {tok}")
            sys.stdout.flush()
            await asyncio.Event().wait()
        finally:
            await service.aclose()
            await gateway.aclose()

    run_async(serve())


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("gateway")(gateway_cmd)
