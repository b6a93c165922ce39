"""``agent-fleet changes RUN_ID [--json]`` and ``agent-fleet apply RUN_ID`` (SPEC.md "Changes").

``changes`` lists what a run's sessions changed, from its log alone: each change's branch, files,
size, paths outside its partition, check outcome, and whether it was merged into the run's branch
(and why not). ``apply`` merges the run's branch into the checked-out branch of the run's
repository — the one command that touches the user's checkout, and only when asked: it refuses a
checkout with uncommitted changes or a merge that would conflict (exit 2), leaving it untouched.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer

from agent_fleet.cli.common import STORE_OPTION, print_json, run_async
from agent_fleet.cli.serve_client import SERVER_OPTION

__all__ = ["register"]


def _print_changes(run_id: str, view: dict[str, Any]) -> None:
    if view.get("base") is None:
        typer.echo(f"run {run_id}: {view.get('note', 'no changes were captured')}")
        return
    rows = view["changes"]
    merged = sum(1 for r in rows if r["merged"])
    typer.echo(
        f"run {run_id}: base {str(view['base'])[:12]} · {len(rows)} change(s) · {merged} merged into {view['branch']}"
    )
    for key in ("note", "error"):
        if view.get(key):
            typer.echo(f"  {view[key]}")
    for r in rows:
        state = "merged" if r["merged"] else f"not merged: {r['reason']}"
        check = (r.get("check") or {}).get("outcome")
        if check:
            state = f"check {check} · {state}"
        typer.echo(
            f"  {r['partition_id']}  {r['session_id'].rsplit('.', 1)[-1]}  +{r['insertions']} -{r['deletions']}"
            f"  {len(r['files'])} file(s)  {r['branch']}  {state}"
        )
        for x in r.get("refused") or ():
            typer.echo(f"      refused {x['path']}: {x['reason']}")
    if merged:
        typer.echo(f"merge them into your checkout: agent-fleet apply {run_id}")


def changes_cmd(
    run_id: str = typer.Argument(..., help="The run whose changes to list."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    server: str | None = SERVER_OPTION,
) -> None:
    """The code changes a run's sessions made: branch, files, size, check, merged or why not."""
    if server is not None:
        from urllib.parse import quote

        from agent_fleet.cli.runs import _remote
        from agent_fleet.cli.serve_client import Remote

        remote = Remote(server)
        view = _remote(lambda: remote.request("GET", f"/v1/runs/{quote(run_id, safe='')}/changes"))
    else:
        from agent_fleet.engine.changes import run_changes_view
        from agent_fleet.session.store import open_store, resolve_store_url

        async def go() -> dict[str, Any]:
            async with open_store(resolve_store_url(store)) as log:
                return await run_changes_view(log, run_id)

        view = run_async(go())
    if as_json:
        print_json(view)
    else:
        _print_changes(run_id, view)


def apply_cmd(
    run_id: str = typer.Argument(..., help="The run whose merged changes to apply."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    push: str | None = typer.Option(
        None, "--push", help="Then push the run's branches to this git remote (a name or a URL)."
    ),
) -> None:
    """Merge the run's branch (fleet/RUN_ID) into the checked-out branch of its repository; with
    --push, then push the run's branches (a refusing remote: one line, exit 4, nothing lost)."""
    from agent_fleet.engine.changes import apply_changes
    from agent_fleet.engine.push import push_branches
    from agent_fleet.engine.remotes import check_push_remote
    from agent_fleet.session.store import open_store, resolve_store_url

    async def go() -> dict[str, Any]:
        async with open_store(resolve_store_url(store)) as log:
            done = await apply_changes(log, run_id)
        out: dict[str, Any] = {
            "run_id": run_id,
            "repo": done.repo,
            "branch": done.branch,
            "into": done.merged_into,
            "before": done.before,
            "after": done.after,
            "changed": done.changed,
        }
        if push is not None:
            await asyncio.to_thread(check_push_remote, Path(done.repo), push)
            out["push"] = await push_branches(done.repo, push, run_id)
        return out

    out = run_async(go())
    if as_json:
        print_json(out)
    elif out["changed"]:
        typer.echo(f"merged {out['branch']} into {out['into']} of {out['repo']} ({out['after'][:12]})")
    else:
        typer.echo(f"{out['branch']} is already in {out['into']} of {out['repo']}: nothing to merge")
    pushed = out.get("push")
    if pushed is not None:
        if pushed["error"]:
            from agent_fleet.cli.common import die
            from agent_fleet.errors import GitRemoteError

            die(pushed["error"], GitRemoteError.exit_code)
        typer.echo(f"agent-fleet: pushed {len(pushed['branches'])} branch(es) to {push}", err=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("changes")(changes_cmd)
    app.command("apply")(apply_cmd)
