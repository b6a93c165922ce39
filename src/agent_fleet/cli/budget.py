"""``agent-fleet budget raise RUN_ID|SESSION_ID (--tokens N | --usd X) [--store URL]``.

Appends a ``budget_raised`` event ``{tokens?, usd?}`` to the run's or the session's stream. The new
values are the new caps. A live run polls its log for these events and applies them to its gateway
(``agent_fleet.spend.gateway.apply_budget_event``); ``resume`` reads them from the log.
"""

from __future__ import annotations

from typing import Any

import typer

from agent_fleet.cli.common import STORE_OPTION, print_json, run_async
from agent_fleet.cli.remote import SERVER_OPTION
from agent_fleet.errors import SessionNotFound

__all__ = ["budget_event_data", "register"]

budget_app = typer.Typer(
    help="Budgets: raise a run's or a session's cap; paused sessions resume.", no_args_is_help=True
)


def budget_event_data(tokens: int | None, usd: str | None) -> dict[str, Any]:
    """The event data for a raise, checked (see :func:`agent_fleet.options.budget_event_data`)."""
    from agent_fleet.options import budget_event_data as checked

    return checked(tokens, usd)


@budget_app.command("raise")
def raise_cmd(
    target: str = typer.Argument(..., metavar="RUN_ID|SESSION_ID", help="The run or the agent session."),
    tokens: int | None = typer.Option(None, "--tokens", help="New token cap (per session; for a run: every session)."),
    usd: str | None = typer.Option(None, "--usd", help="New dollar cap (list prices); for a run, its fleet cap."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the appended event as JSON."),
    server: str | None = SERVER_OPTION,
) -> None:
    """Raise a budget; paused sessions resume."""
    from agent_fleet.domain.events import EventType
    from agent_fleet.session.store import open_store, resolve_store_url

    async def remote() -> dict[str, Any]:
        from agent_fleet.cli.remote import Remote

        data = budget_event_data(tokens, usd)
        run_id, _, rest = target.partition(".")
        body = {**data, "session_id": target} if rest else data
        event = Remote(str(server)).request("POST", f"/v1/runs/{run_id}/budget", body)
        return {**event, "kind": "session" if rest else "run"}

    async def go() -> dict[str, Any]:
        data = budget_event_data(tokens, usd)
        async with open_store(resolve_store_url(store)) as log:
            record = await log.get_session(target)
            if record is None:
                raise SessionNotFound(f"no run or session {target!r} in this store")
            event = await log.emit_event(target, EventType.BUDGET_RAISED, data)
            return {**event.to_dict(), "kind": record.kind}

    event = run_async(remote() if server is not None else go())
    if as_json:
        print_json(event)
        return
    caps = ", ".join(f"{k} {v}" for k, v in event["data"].items())
    typer.echo(f"{event['kind']} {target}: budget raised ({caps}); paused sessions resume")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(budget_app, name="budget")
