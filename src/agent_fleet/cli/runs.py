"""Run commands: ``deploy``, ``estimate``, ``resume``, ``status``, ``events``, ``metrics``.

The engine, the store and rich are imported inside the commands: building the app (and ``--help``)
loads none of them. How they print a summary, a forecast or an event log is
:mod:`agent_fleet.cli.run_output`, imported inside the commands too.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from agent_fleet.cli.common import STORE_OPTION, die, print_json, progress_option, run_async
from agent_fleet.cli.serve_client import SERVER_OPTION
from agent_fleet.errors import SessionNotFound, UsageError

if TYPE_CHECKING:
    from agent_fleet.domain.events import SessionRecord
    from agent_fleet.engine import Engine, RunOptions, RunReport
    from agent_fleet.session.port import SessionLog

__all__ = ["register"]

_MAX_SEQ = 2**63 - 1


def _announce(run_id: str, engine: Engine) -> None:
    typer.echo(f"agent-fleet: run {run_id} started", err=True)


def _at_least_one(flag: str, value: int | None) -> int:
    """0 stands for "not given" in RunOptions; a given value must be at least 1."""
    if value is None:
        return 0
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, got {value}")
    return value


def _threshold(text: str | None) -> float | None:
    """``--dedup-threshold``: read here, so that a word that is no number is one line too."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--dedup-threshold must be a number in (0, 1], got {text!r}") from None


def deploy_cmd(
    task: str = typer.Option(..., "--task", help="What every agent should do."),
    input: str | None = typer.Option(None, "--input", help="A directory (codebase), a .txt list, .jsonl or .csv."),
    agents: int = typer.Option(10, "--agents", help="How many agent sessions (partitions)."),
    budget_tokens: int | None = typer.Option(None, "--budget-tokens", help="Token budget per agent session [128000]."),
    budget_usd: str | None = typer.Option(None, "--budget-usd", help="Dollar budget per session (list prices)."),
    fleet_budget_usd: str | None = typer.Option(None, "--fleet-budget-usd", help="Dollar budget of the whole run."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per session attempt."),
    model: str = typer.Option("gpt-4.1-mini", "--model", help="Model name sent to the provider."),
    provider: str | None = typer.Option(None, "--provider", help="openai, anthropic or a base URL."),
    config: str | None = typer.Option(None, "--config", help="fleet.yaml"),
    store: str | None = STORE_OPTION,
    out: str | None = typer.Option(None, "--out", help="Output directory (default .fleet/runs/RUN_ID)."),
    queue: str | None = typer.Option(None, "--queue", help="Admission queue (LocalQueue) name."),
    priority: str | None = typer.Option(None, "--priority", help="WorkloadPriorityClass name."),
    requests: str | None = typer.Option(
        None,
        "--requests",
        help="Each session's requests for admission: cpu=N,memory=Q,NAME=N [pods 1, fleet.yaml hands.cpu/memory].",
    ),
    max_concurrency: int | None = typer.Option(None, "--max-concurrency", help="Initial API concurrency [50]."),
    max_turns: int | None = typer.Option(None, "--max-turns", help="Model turns per session before it pauses [60]."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", help="Output limit sent on every model call [fleet.yaml models[].max_tokens, else 4096]."
    ),
    temperature: float | None = typer.Option(None, "--temperature", help="Sent on every model call (0: greedy)."),
    seed: int | None = typer.Option(None, "--seed", help="Sent on every model call (reproducible runs)."),
    agent_cmd: str | None = typer.Option(None, "--agent-cmd", help="Run this CLI agent per partition."),
    agent_format: str = typer.Option(
        "jsonl", "--agent-format", help="How --agent-cmd's stdout is read: jsonl, claude, codex or aider."
    ),
    embedder: str = typer.Option(
        "auto",
        "--embedder",
        help="Dedup embedder: auto, minilm, fast (int8, the fast-embed extra), lexical or provider.",
    ),
    embedding_model: str | None = typer.Option(
        None, "--embedding-model", help="With --embedder provider: the embeddings model [text-embedding-3-small]."
    ),
    dedup_scope: str | None = typer.Option(
        None,
        "--dedup-scope",
        help="Which results may merge: auto (results about different input items never do), global, item, none.",
    ),
    dedup_threshold: str | None = typer.Option(
        None, "--dedup-threshold", help="Cosine in (0, 1] at which two results say the same [the embedder's]."
    ),
    executor: str | None = typer.Option(
        None, "--executor", help="Where harnesses run: local, ray:auto or ray://HOST:PORT [fleet.yaml, else local]."
    ),
    check: str | None = typer.Option(
        None, "--check", help="Shell command run per change, in a sandbox of the base plus that change; 0 passes."
    ),
    push: str | None = typer.Option(
        None, "--push", help="Git remote (name or URL) the run's branches are pushed to when it ends."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print only the summary JSON on stdout."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decompose and forecast only; run nothing."),
    server: str | None = SERVER_OPTION,
    detach: bool = typer.Option(False, "--detach", help="With --server: print the run id and return at once."),
    progress: str = progress_option(),
) -> None:
    """Decompose → dispatch → aggregate, end to end."""
    from agent_fleet.cli.run_output import print_estimate
    from agent_fleet.engine import RunOptions
    from agent_fleet.options import parse_requests

    def options() -> RunOptions:
        return RunOptions(
            task=task,
            input_path=input,
            agents=agents,
            budget_tokens=budget_tokens,
            budget_usd=budget_usd,
            fleet_budget_usd=fleet_budget_usd,
            timeout=timeout,
            model=model,
            provider=provider,
            out_dir=os.path.abspath(out) if out else None,
            queue=queue,
            priority=priority,
            requests=parse_requests(requests),
            max_concurrency=_at_least_one("--max-concurrency", max_concurrency),
            max_turns=_at_least_one("--max-turns", max_turns),
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            agent_cmd=agent_cmd,
            agent_format=agent_format,
            config_path=config,
            embedder=embedder,
            embedding_model=embedding_model,
            executor=executor,
            check=check,
            push=push,
            dedup_scope=dedup_scope,
            dedup_threshold=_threshold(dedup_threshold),
        )

    if detach and server is None:
        raise_usage("--detach needs --server (or $FLEET_SERVER)")
    if server is not None and not dry_run:
        _deploy_remote(server, options, detach=detach, as_json=as_json)
        return
    if dry_run:
        print_estimate(run_async(_estimate(options, store)), as_json)
        return

    _deploy_local(options, store, as_json=as_json, progress=progress)


def _deploy_local(options: Callable[[], RunOptions], store: str | None, *, as_json: bool, progress: str) -> None:
    """The run in this process, its progress live on the terminal; the summary at the end."""
    from agent_fleet.cli.progress import live_progress
    from agent_fleet.cli.run_output import finish
    from agent_fleet.engine import deploy

    engine_box: list[Engine] = []

    def started(run_id: str, engine: Engine) -> None:
        engine_box.append(engine)
        _announce(run_id, engine)

    async def go() -> RunReport:
        opts = options()
        async with live_progress(engine_box, mode=progress):
            return await deploy(opts, store_url=store, on_start=started)

    finish(run_async(go()), as_json)


def raise_usage(message: str) -> None:
    from agent_fleet.cli.common import die

    die(message, UsageError.exit_code)


def _remote(fn: Callable[[], Any]) -> Any:
    """A ``--server`` call: FleetErrors become one line and their exit code, as local commands do."""
    from agent_fleet.cli.common import die
    from agent_fleet.errors import FleetError

    try:
        return fn()
    except FleetError as exc:
        die(str(exc) or type(exc).__name__, exc.exit_code)


def _deploy_remote(server: str, options: Callable[[], RunOptions], *, detach: bool, as_json: bool) -> None:
    from agent_fleet.cli.run_output import finish_summary
    from agent_fleet.cli.serve_client import Remote, run_body

    remote = Remote(server)
    started = _remote(lambda: remote.request("POST", "/v1/runs", run_body(options())))
    run_id = started["run_id"]
    if detach:
        if as_json:
            print_json(started)
        else:
            typer.echo(run_id)
        return
    typer.echo(f"agent-fleet: run {run_id} started on {remote.url}", err=True)
    finish_summary(_remote(lambda: remote.wait(run_id)), as_json)


async def _estimate(options: Callable[[], RunOptions], store: str | None = None) -> dict[str, Any]:
    from agent_fleet.engine import estimate

    return await estimate(options(), store_url=store)


def estimate_cmd(**kwargs: Any) -> None:
    """Decompose and forecast tokens, list cost, wall time and the binding limit (same flags as deploy)."""
    kwargs.pop("dry_run", None)
    deploy_cmd(**kwargs, dry_run=True)


_deploy_sig = inspect.signature(deploy_cmd)
estimate_cmd.__signature__ = _deploy_sig.replace(  # type: ignore[attr-defined]
    parameters=[p for name, p in _deploy_sig.parameters.items() if name != "dry_run"]
)
estimate_cmd.__annotations__ = {k: v for k, v in deploy_cmd.__annotations__.items() if k != "dry_run"}


def resume_cmd(
    run_id: str = typer.Argument(..., help="The run to continue."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print only the summary JSON on stdout."),
    wait: bool = typer.Option(
        False, "--wait", help="If another live engine owns the run, wait for it instead of exiting 5."
    ),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Run the sessions that failed for good again, from their logs."
    ),
    push: str | None = typer.Option(
        None, "--push", help="Git remote (name or URL) the run's branches are pushed to once it has ended."
    ),
    server: str | None = SERVER_OPTION,
    progress: str = progress_option(),
) -> None:
    """Continue an interrupted, crashed or budget-paused run from the session log. A run that has
    ended is left as it is: its summary is printed (--retry-failed runs its failed sessions again)."""
    from agent_fleet.cli.run_output import finish, finish_summary

    if server is not None:
        from agent_fleet.cli.serve_client import Remote

        if retry_failed or push:
            die(f"{'--retry-failed' if retry_failed else '--push'} is not available with --server", code=2)
        remote = Remote(server)
        _remote(lambda: remote.request("POST", f"/v1/runs/{run_id}/resume"))
        typer.echo(f"agent-fleet: run {run_id} resumed on {remote.url}", err=True)
        finish_summary(_remote(lambda: remote.wait(run_id)), as_json)
        return
    from agent_fleet.cli.progress import live_progress
    from agent_fleet.engine import resume

    engine_box: list[Engine] = []

    def started(rid: str, engine: Engine) -> None:
        engine_box.append(engine)
        typer.echo(f"agent-fleet: run {rid} resumed", err=True)

    async def go() -> RunReport:
        async with live_progress(engine_box, mode=progress):
            return await resume(
                run_id, store_url=store, on_start=started, wait=wait, retry_failed=retry_failed, push=push
            )

    report = run_async(go())
    if not engine_box and push is None:  # with --push, the push's own line says what was done
        typer.echo(f"agent-fleet: run {run_id} has already ended ({report.status}); nothing was run", err=True)
    finish(report, as_json)


async def _run_row(log: SessionLog, rec: SessionRecord) -> dict[str, Any]:
    from agent_fleet.domain.decode import decode
    from agent_fleet.domain.events import SessionState
    from agent_fleet.domain.payloads import RunCreated, RunResumed

    state = rec.state
    if state in (SessionState.RUNNING, SessionState.CREATED):
        owner: dict[str, Any] = {}
        for ev in await log.get_events(rec.session_id):
            p = decode(ev)
            if isinstance(p, RunCreated | RunResumed):
                owner = dict(p.owner)
        if not _owner_alive(owner):
            state = SessionState.INTERRUPTED
    return {
        "run_id": rec.session_id,
        "status": str(state),
        "task": rec.info.get("task", ""),
        "input": rec.info.get("input"),
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
    }


def _owner_alive(owner: dict[str, Any]) -> bool:
    """A run stream says ``running`` until it ends; a run whose process is gone was interrupted."""
    from agent_fleet.engine.records import owner_alive

    return owner_alive(owner)


def status_cmd(
    run_id: str | None = typer.Argument(None, help="A run id; without it, every run, newest first."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json"),
    server: str | None = SERVER_OPTION,
) -> None:
    """Runs, or one run: sessions by state, tokens, cost, errors."""
    from agent_fleet.aggregate.live import snapshot_key
    from agent_fleet.observe.summary import read_run_figures
    from agent_fleet.session.store import open_store, resolve_store_url

    async def go() -> dict[str, Any]:
        async with open_store(resolve_store_url(store)) as log:
            if run_id is None:
                return {"runs": [await _run_row(log, r) for r in await log.list_runs(limit=1000)]}
            rec = await log.get_session(run_id)
            if rec is None or rec.kind != "run":
                raise SessionNotFound(f"no run {run_id!r} in this store")
            out = {**await _run_row(log, rec), **await read_run_figures(log, run_id)}
            live = await log.get_snapshot(snapshot_key(run_id))
            if live is not None:  # clustered as the results came in; final once the run has ended
                keys = ("raw", "unique", "dedup_rate", "final", "embedder", "embedded", "cache_hits")
                out["dedup"] = {k: live.get(k) for k in keys}
            return out

    if server is not None:
        from agent_fleet.cli.serve_client import Remote

        remote = Remote(server)
        data = _remote(lambda: remote.request("GET", f"/v1/runs/{run_id}" if run_id else "/v1/runs"))
    else:
        data = run_async(go())
    if as_json:
        print_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if run_id is None:
        from rich.table import Column

        # Ids and times are never cut or wrapped (a script or a person copies them); the task wraps.
        table = Table(
            Column("run", no_wrap=True, min_width=len(max((r["run_id"] for r in data["runs"]), key=len, default=""))),
            Column("status", no_wrap=True),
            Column("task", ratio=1),
            Column("created", no_wrap=True, min_width=19),
        )
        for r in data["runs"]:
            created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created_at"]))
            table.add_row(r["run_id"], r["status"], r["task"][:60], created)
        console.print(table)
        return
    table = Table(title=f"run {data['run_id']} — {data['status']}", show_header=False)
    table.add_row("sessions", ", ".join(f"{n} {s}" for s, n in sorted(data["sessions"].items())))
    table.add_row("tokens", f"{data['tokens']['total']:,}")
    table.add_row("cost", f"${data['cost_usd']:.4f}")
    table.add_row("model calls", str(data["llm_calls"]))
    table.add_row("errors", _nonzero(data["errors"]))
    table.add_row("results", f"{data['results_raw']} raw")
    if "dedup" in data:
        d = data["dedup"]
        state = "final" if d["final"] else "live"
        table.add_row("dedup", f"{d['raw']} → {d['unique']} unique ({d['dedup_rate']:.1%}, {state})")
    console.print(table)


def _nonzero(errors: dict[str, int]) -> str:
    """The error kinds that happened, ``none`` when none did (the JSON lists every kind)."""
    return ", ".join(f"{k} {n}" for k, n in errors.items() if n) or "none"


def events_cmd(
    session_id: str = typer.Argument(..., help="A session id (or a run id for the run's own stream)."),
    after: int = typer.Option(0, "--after", min=0, help="Only events with seq greater than this."),
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json"),
    server: str | None = SERVER_OPTION,
) -> None:
    """Read a session's event log."""
    from agent_fleet.cli.run_output import print_events

    after = min(after, _MAX_SEQ)  # past the store's 64-bit integers every seq is behind
    from agent_fleet.session.store import open_store, resolve_store_url

    if server is not None:
        from agent_fleet.cli.serve_client import Remote

        remote = Remote(server)
        from urllib.parse import quote, urlencode

        run_id = session_id.partition(".")[0]
        query = urlencode({"session": session_id, "after": after, "limit": 10_000})
        path = f"/v1/runs/{quote(run_id, safe='')}/events?{query}"
        print_events(session_id, _remote(lambda: remote.request("GET", path))["events"], as_json)
        return

    async def go() -> list[dict[str, Any]]:
        async with open_store(resolve_store_url(store)) as log:
            if await log.get_session(session_id) is None:
                raise SessionNotFound(f"no session {session_id!r} in this store")
            return [e.to_dict() for e in await log.get_events(session_id, after=after)]

    print_events(session_id, run_async(go()), as_json)


def metrics_cmd(
    run_id: str | None = typer.Argument(None, help="A run id; without it, the newest run."),
    store: str | None = STORE_OPTION,
) -> None:
    """A run's metrics in Prometheus text format: fleet_* figures and Kueue's admission metrics."""
    from agent_fleet.observe.metrics import metrics_key
    from agent_fleet.session.store import open_store, resolve_store_url

    async def go() -> str:
        async with open_store(resolve_store_url(store)) as log:
            rid = run_id
            if rid is None:
                runs = await log.list_runs(limit=1)
                if not runs:
                    raise SessionNotFound("no runs in this store")
                rid = runs[0].session_id
            snap = await log.get_snapshot(metrics_key(rid))
            if snap is None:
                raise SessionNotFound(f"no metrics recorded for run {rid!r}")
            return str(snap["text"])

    sys.stdout.write(run_async(go()))


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy_cmd)
    app.command("estimate")(estimate_cmd)
    app.command("resume")(resume_cmd)
    app.command("status")(status_cmd)
    app.command("events")(events_cmd)
    app.command("metrics")(metrics_cmd)
