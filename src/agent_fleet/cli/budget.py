"""``agent-fleet budget raise RUN_ID|SESSION_ID (--tokens N | --usd X) [--store URL]``.

Appends a ``budget_raised`` event ``{tokens?, usd?}`` to the run's or the session's stream. The new
values are the new caps. A live run polls its log for these events and applies them to its gateway
(``agent_fleet.spend.gateway.apply_budget_event``); ``resume`` reads them from the log.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

import typer

from agent_fleet.cli.common import STORE_OPTION, print_json, run_async
from agent_fleet.cli.serve_client import SERVER_OPTION
from agent_fleet.errors import FleetError, SessionNotFound

if TYPE_CHECKING:
    from agent_fleet.session.port import SessionLog

__all__ = ["budget_event_data", "direction", "register"]

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
        from agent_fleet.cli.serve_client import Remote

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
            before = await _caps_in_force(log, target, record.kind)
            event = await log.emit_event(target, EventType.BUDGET_RAISED, data)
            return {**event.to_dict(), "kind": record.kind, "direction": direction(before, data)}

    event = run_async(remote() if server is not None else go())
    if as_json:
        print_json(event)
        return
    caps = ", ".join(f"{k} {v}" for k, v in event["data"].items())
    way = event.get("direction", "raised")
    if way == "lowered":
        typer.echo(f"{event['kind']} {target}: budget lowered ({caps}); sessions past it pause at their next call")
    else:
        typer.echo(f"{event['kind']} {target}: budget {way} ({caps}); paused sessions resume")


def direction(before: dict[str, Decimal | None], after: dict[str, Any]) -> str:
    """``raised``, ``lowered`` or ``set``: how the new caps compare with the ones in force (a cap
    that was not in force, or caps that move both ways, are ``set``)."""
    moves = set()
    for key, value in after.items():
        old = before.get(key)
        if old is None:
            return "set"
        new = Decimal(str(value))
        if new != old:
            moves.add("raised" if new > old else "lowered")
    return moves.pop() if len(moves) == 1 else ("raised" if not moves else "set")


async def _caps_in_force(log: SessionLog, target: str, kind: str) -> dict[str, Decimal | None]:
    """The token and dollar caps in force for ``target`` before this change: the run's options, then
    the latest ``budget_raised`` of the run's stream or (for a session) its own."""
    from agent_fleet.domain.decode import decode_as
    from agent_fleet.domain.events import EventType
    from agent_fleet.domain.payloads import BudgetRaised
    from agent_fleet.engine.records import load_run

    run_id = target.partition(".")[0]
    caps: dict[str, Decimal | None] = {"tokens": None, "usd": None}
    try:
        options, _ = await load_run(log, run_id)
    except (FleetError, LookupError, TypeError, ValueError):  # a stream without its recorded options: caps unknown
        pass
    else:
        usd = options.budget_usd if kind != "run" else options.fleet_budget_usd
        caps["tokens"] = Decimal(options.budget_tokens) if options.budget_tokens is not None else None
        caps["usd"] = Decimal(usd) if usd is not None else None
    streams = {run_id, target}
    raises = [e for sid in streams for e in await log.get_events(sid) if e.type == EventType.BUDGET_RAISED]
    for event in sorted(raises, key=lambda e: e.time):
        raised = decode_as(event, BudgetRaised)
        if raised is not None and raised.tokens is not None:
            caps["tokens"] = Decimal(raised.tokens)
        if raised is not None and raised.usd is not None:
            caps["usd"] = raised.usd
    return caps


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(budget_app, name="budget")
