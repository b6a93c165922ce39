"""How the run commands print: a run's summary (and its exit code), a forecast, an event log.

rich and the exit codes are imported inside the functions, and the commands import this module
inside themselves: building the app (and ``--help``) loads none of it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agent_fleet.cli.common import print_json

if TYPE_CHECKING:
    from agent_fleet.engine import RunReport

__all__ = ["finish", "finish_summary", "print_estimate", "print_events", "print_summary", "why_not_completed"]


def finish(report: RunReport, as_json: bool) -> None:
    finish_summary(report.summary, as_json, push=report.push)


def finish_summary(summary: dict[str, Any], as_json: bool, *, push: dict[str, Any] | None = None) -> None:
    """Print the summary and exit with the run's code; a ``--push`` the remote refused is one line on
    stderr and exit 4 (the run itself has ended and kept everything: its branches stay local)."""
    from agent_fleet.errors import GitRemoteError
    from agent_fleet.options import exit_code_for

    if as_json:
        print_json(summary)
    else:
        print_summary(summary)
    if push is not None:
        if push.get("error"):
            from agent_fleet.cli.common import die

            die(str(push["error"]), GitRemoteError.exit_code)
        branches = push.get("branches") or []
        typer.echo(f"agent-fleet: pushed {len(branches)} branch(es) to {push['remote']}", err=True)
    code = exit_code_for(str(summary["status"]))
    if code:
        typer.echo(f"agent-fleet: {why_not_completed(summary)}", err=True)  # every non-zero exit says why
        raise typer.Exit(code)


_GUARDS = {
    "repeated_tool_call": "the same tool call repeated",
    "max_turns": "the turn limit",
    "no_progress": "no progress",
}


def why_not_completed(s: dict[str, Any]) -> str:
    """One line: why a run that ended did not complete, from its summary alone."""
    run = s.get("run_id", "")
    status = str(s.get("status"))
    sessions = s.get("sessions") or {}
    if status == "paused":
        reasons = dict((s.get("decisions") or {}).get("pauses") or {})
        guards = [_GUARDS.get(str(r), str(r)) for r in reasons if r != "budget"]  # every pause of the run, by reason
        if guards and "budget" not in reasons:
            return (
                f"run {run}: {sessions.get('paused', 0)} session(s) stopped by a runaway guard: "
                f"{', '.join(guards)}; `agent-fleet resume {run}` continues them from their logs"
            )
        if guards:
            return (
                f"run {run}: {sessions.get('paused', 0)} session(s) paused, on budget and by a runaway guard "
                f"({', '.join(guards)}); `agent-fleet budget raise {run} --tokens N` lets them go on"
            )
        return (
            f"run {run}: {sessions.get('paused', 0)} session(s) paused on budget; "
            f"`agent-fleet budget raise {run} --tokens N` lets them go on"
        )
    if status == "interrupted":
        return f"run {run} was interrupted; `agent-fleet resume {run}` continues it"
    kinds = _nonzero(s.get("errors") or {})
    cause = f"model-call errors: {kinds}" if kinds != "none" else "see `agent-fleet status` and their events"
    failed = sessions.get("failed", 0)
    total = sum(v for v in sessions.values() if isinstance(v, int))
    return f"run {run}: {failed} of {total} session(s) failed for good ({cause})"


def _nonzero(errors: dict[str, int]) -> str:
    """Error kinds that happened, ``none`` when none did (summary.json lists every kind)."""
    seen = {k: n for k, n in errors.items() if n}
    return ", ".join(f"{k} {n}" for k, n in seen.items()) or "none"


def print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"run {s['run_id']} — {s['status']}", show_header=False)
    sessions = s["sessions"]
    rows = [
        ("task", s["task"]),
        ("partitions", str(s["partitions"])),
        ("sessions", f"{sessions['completed']} completed, {sessions['failed']} failed, {sessions['paused']} paused"),
        ("results", f"{s['results_raw']} raw → {s['results_unique']} unique (dedup {s['dedup_rate']:.1%})"),
        ("tokens", f"{s['tokens']['total']:,} ({s['tokens']['input']:,} in, {s['tokens']['output']:,} out)"),
        ("cost", f"${s['cost_usd']:.4f} at list prices"),
        ("model calls", f"{s['llm_calls']:,}; errors {_nonzero(s['errors'])}"),
        ("duration", f"{s['duration_s']:.1f} s"),
    ]
    changes = s.get("changes") or {}
    if changes.get("sessions_with_changes"):
        merged = f"{changes['merged']} merged into {changes['branch']}"
        size = f"+{changes['insertions']:,} −{changes['deletions']:,} in {changes['files']:,} file(s)"
        rows.append(("changes", f"{changes['sessions_with_changes']} session(s), {size}; {merged}"))
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)
    typer.echo(f"report: {Path(s['out_dir']) / 'report.md'}")  # one unwrapped line, for scripts too


def print_estimate(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    f = data["forecast"]
    table = Table(title="forecast (nothing was run)", show_header=False)
    plan = data["plan"]
    table.add_row("plan", f"{plan['partitions']} sessions over {plan['items']} items (tree depth {plan['depth']})")
    for note in (plan.get("notes") or [])[:5]:
        table.add_row("", str(note))
    table.add_row("model calls", f"{f['llm_calls']['low']:,} – {f['llm_calls']['high']:,}")
    table.add_row("tokens", f"{f['tokens']['total']['low']:,} – {f['tokens']['total']['high']:,}")
    table.add_row("cost", f"${f['cost_usd']['low']} – ${f['cost_usd']['high']} at list prices ({f['model']})")
    table.add_row("wall time", f"{f['wall_s']['low']:.0f} – {f['wall_s']['high']:.0f} s")
    table.add_row("binding limit", f"{f['binding']}: {f['reason']}")
    lat = f["assumptions"]
    table.add_row("latency", f"{lat['latency_s']:.2f} s per call ({lat['latency_source']})")
    Console().print(table)


def print_events(session_id: str, events: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json({"session_id": session_id, "events": events})
        return
    for e in events:
        stamp = time.strftime("%H:%M:%S", time.localtime(e["time"]))
        data = str(e["data"])
        sys.stdout.write(f"{e['seq']:>6}  {stamp}  {e['type']:<18} {data[:100]}\n")
