"""``agent-fleet review [RUN_ID] [--all] [--json]`` · ``review approve|reject ID [--note TEXT]``.

The exception-based review queue (:mod:`agent_fleet.supervise`): low-confidence results, refuted or
unsure verdicts, sessions paused by guards or budget, sessions out of attempts and decision-shape
alarms. Without a run id it lists the open items of the recent runs. A decision appends a
``review_decision`` event to the run's stream; the latest decision on an item counts.

Thresholds come from fleet.yaml ``supervision:`` — ``--config``, else the file the run was deployed
with, else the defaults.
"""

from __future__ import annotations

from typing import Any

import typer

from agent_fleet.cli.common import STORE_OPTION, die, print_json, run_async

__all__ = ["register"]

_ACTIONS = ("approve", "reject")
_RECENT_RUNS = 20


async def _listing(store: str | None, run_id: str | None, config: str | None, everything: bool) -> dict[str, Any]:
    from agent_fleet.session.store import open_store, resolve_store_url
    from agent_fleet.supervise import load_review, queue_counts, run_policy

    async with open_store(resolve_store_url(store)) as log:
        runs = [run_id] if run_id is not None else [r.session_id for r in await log.list_runs(_RECENT_RUNS)]
        out = []
        for rid in runs:
            items = await load_review(log, rid, await run_policy(log, rid, config))
            shown = items if everything else [i for i in items if i.open]
            out.append({"run_id": rid, "counts": queue_counts(items), "items": [i.to_dict() for i in shown]})
    if run_id is not None:
        return out[0]
    return {"runs": [r for r in out if r["items"]]}


async def _decide(store: str | None, action: str, item_id: str, note: str | None, config: str | None) -> dict[str, Any]:
    from agent_fleet.errors import UsageError
    from agent_fleet.session.store import open_store, resolve_store_url
    from agent_fleet.supervise import Decision, decide, run_of_item, run_policy

    run_id = run_of_item(item_id)
    if run_id is None:
        raise UsageError(f"{item_id!r} is not a review item id (KIND:SUBJECT, as `agent-fleet review` lists them)")
    async with open_store(resolve_store_url(store)) as log:
        item, event = await decide(log, item_id, Decision(action), note, await run_policy(log, run_id, config))
    return {"item": item.to_dict(), "event": event.to_dict()}


def _print_items(run_id: str, counts: dict[str, Any], items: list[dict[str, Any]]) -> None:
    typer.echo(
        f"run {run_id}: {counts['open']} open, {counts['approved']} approved, "
        f"{counts['rejected']} rejected, {counts['resolved']} resolved"
    )
    for it in items:
        note = f" — {it['note']}" if it.get("note") else ""
        typer.echo(f"  [{it['status']}] {it['id']}\n      {it['reason'][:200]}{note}")


def review_cmd(
    first: str | None = typer.Argument(
        None, metavar="RUN_ID|approve|reject", show_default=False, help="A run, or the decision to record."
    ),
    item: str | None = typer.Argument(None, metavar="ID", show_default=False, help="The item to decide on."),
    note: str | None = typer.Option(None, "--note", help="Why (with approve or reject); kept in the event."),
    everything: bool = typer.Option(False, "--all", help="Also the items already decided or resolved."),
    config: str | None = typer.Option(None, "--config", help="fleet.yaml whose supervision: thresholds apply."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The exception-based review queue: list a run's items, or approve / reject one.

    `review [RUN_ID]` lists the open items (of the recent runs without RUN_ID); `review approve ID
    [--note TEXT]` and `review reject ID [--note TEXT]` record a decision as an event of the run.
    """
    if first in _ACTIONS:
        if item is None:
            die(f"review {first} needs an item id (as `agent-fleet review RUN_ID` lists them)", 2)
        result = run_async(_decide(store, first, item, note, config))
        if as_json:
            print_json(result)
            return
        verb = "approved" if first == "approve" else "rejected"
        typer.echo(f"{verb} {item} (event {result['event']['seq']} of run {result['item']['run_id']})")
        return
    if item is not None:
        die(f"unexpected argument {item!r}: use `review RUN_ID` or `review approve|reject ID`", 2)
    if note is not None:
        die("--note goes with approve or reject", 2)
    listing = run_async(_listing(store, first, config, everything))
    if as_json:
        print_json(listing)
        return
    runs = [listing] if first is not None else listing["runs"]
    if not runs:
        typer.echo("nothing to review")
    for run in runs:
        _print_items(run["run_id"], run["counts"], run["items"])


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("review")(review_cmd)
