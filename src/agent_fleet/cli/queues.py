"""``agent-fleet queues``: admission state per ClusterQueue, and ``queues simulate``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import typer

from agent_fleet.errors import ConfigError, FleetError, StoreUnreachable

if TYPE_CHECKING:
    from agent_fleet.admission.objects import KueueObjects
    from agent_fleet.config import FleetConfig

__all__ = ["load_queue_config", "register"]

SNAPSHOT_KEY = "admission"

queues_app = typer.Typer(
    name="queues",
    help="Admission state: per queue admitted / pending active / pending inadmissible, usage vs quota.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _fail(exc: FleetError) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(exc.exit_code)


def load_queue_config(path: Path, *, default: Callable[[FleetConfig], KueueObjects] | None = None) -> KueueObjects:
    """Kueue objects from a fleet.yaml (``queues:`` a path or inline objects) or a Kueue YAML file.
    A fleet.yaml without ``queues:`` is refused, or gives ``default(its config)`` when given."""
    from agent_fleet.admission.kueue import load_kueue_yaml
    from agent_fleet.config import load_config, load_yaml, read_yaml_file

    text = read_yaml_file(path)
    first = load_yaml(text, source=str(path))
    if default is not None and (first is None or (isinstance(first, Mapping) and not _names_objects(first))):
        return default(load_config(path))
    if isinstance(first, Mapping) and "kind" not in first and "queues" in first:
        queues = first["queues"]
        if isinstance(queues, str):
            target = Path(queues)
            if not target.is_absolute():
                target = path.parent / target
            if not target.is_file():
                raise ConfigError(f"{path}: queues: no such file {str(target)!r}")
            return load_kueue_yaml(target)
        if isinstance(queues, list):
            return load_kueue_yaml(queues)
        raise ConfigError(f"{path}: queues: must be a path to Kueue YAML or a list of Kueue objects")
    if isinstance(first, Mapping) and "kind" not in first and isinstance(first.get("objects"), list):
        return load_kueue_yaml(first["objects"])  # a simulation scenario
    if isinstance(first, Mapping) and "kind" not in first:
        raise ConfigError(f"{path}: neither Kueue YAML nor a fleet.yaml with queues:")
    return load_kueue_yaml(path)


def _names_objects(doc: Mapping[str, Any]) -> bool:
    """Whether a YAML mapping is a Kueue object or carries Kueue objects (``queues:``, ``objects:``)."""
    return "kind" in doc or "queues" in doc or "objects" in doc


def _read_live(store: str | None) -> dict[str, Any] | None:
    import asyncio

    from agent_fleet.session.store import open_store, resolve_store_url

    url = resolve_store_url(store)
    if url.lower().startswith("sqlite:"):
        # Reading must not create an empty store where there was none.
        raw = unquote(urlsplit(url).path[1:])
        if raw and not Path(raw).expanduser().exists():
            return None
    log = open_store(url)

    async def read() -> dict[str, Any] | None:
        async with log:
            return await log.get_snapshot(SNAPSHOT_KEY)

    return asyncio.run(read())


def _render(data: Mapping[str, Any], source: str) -> str:
    rows = data.get("cluster_queues", [])
    if not rows:
        return "no ClusterQueues"
    lines = [f"admission state ({source})"]
    header = f"{'CLUSTERQUEUE':<24} {'COHORT':<16} {'ADMITTED':>8} {'ACTIVE':>8} {'INADMISSIBLE':>12}  USAGE/QUOTA"
    lines.append(header)
    for row in rows:
        usage = ", ".join(
            f"{r['resource']}[{r['flavor']}] {r['usage']}/{r['nominal_quota']}"
            + (f" (+{r['borrowing_limit']} borrow)" if r.get("borrowing_limit") is not None else "")
            for r in row.get("resources", [])
        )
        lines.append(
            f"{row['name']:<24} {row.get('cohort') or '-':<16} {row['admitted']:>8} {row['pending_active']:>8} "
            f"{row['pending_inadmissible']:>12}  {usage or '-'}"
        )
    return "\n".join(lines)


@queues_app.callback()
def queues(
    ctx: typer.Context,
    config: Path | None = typer.Option(None, "--config", help="fleet.yaml (queues:) or Kueue YAML"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    store: str | None = typer.Option(None, "--store", envvar="FLEET_STORE", help="session store URL"),
) -> None:
    """Per ClusterQueue: admitted, pending active, pending inadmissible, usage vs quota: of --config's
    queues when given, else of the newest run's stored admission state."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        if config is not None:  # the file asked for, whatever a run stored
            from agent_fleet.admission.controller import AdmissionController
            from agent_fleet.clock import VirtualClock

            objects = load_queue_config(config)
            for warning in objects.warnings:
                typer.echo(f"warning: {warning}", err=True)
            data = AdmissionController(objects, VirtualClock(), with_metrics=False).snapshot()
            source = f"configuration {config}"
        else:
            live: dict[str, Any] | None = None
            try:
                live = _read_live(store)
            except StoreUnreachable:
                live = None
            if live is not None:
                data, source = live, "live run"
            else:
                data, source = {"cluster_queues": []}, "no run has stored admission state; no --config given"
    except FleetError as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps({"source": source, **data}, sort_keys=True))
    else:
        typer.echo(_render(data, source) if data.get("cluster_queues") else source)


@queues_app.command("simulate")
def simulate_command(
    scenario: Path = typer.Argument(..., help="scenario YAML (SPEC.md, Admission scenarios)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Run a workload trace through the admission controller on a virtual clock."""
    from agent_fleet.admission.simulate import format_result, load_scenario, simulate

    try:
        loaded = load_scenario(scenario)
        result = simulate(loaded)
    except FleetError as exc:
        raise _fail(exc) from None
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        typer.echo(json.dumps(result.to_json()))
    else:
        typer.echo(format_result(result))


@queues_app.command("export")
def export_command(
    config: Path | None = typer.Option(None, "--config", help="fleet.yaml (queues:) or Kueue YAML"),
    out: Path | None = typer.Option(None, "--out", help="write the YAML to this file instead of stdout"),
    jobs: bool = typer.Option(False, "--jobs", help="write the sandbox Jobs of a run's plan instead"),
    task: str | None = typer.Option(None, "--task", help="with --jobs: what every agent should do"),
    input: str | None = typer.Option(None, "--input", help="with --jobs: a directory, a .txt list, .jsonl or .csv"),
    agents: int = typer.Option(10, "--agents", help="with --jobs: how many agent sessions (partitions)"),
    queue: str | None = typer.Option(None, "--queue", help="with --jobs: the LocalQueue (ns/name or name)"),
    priority: str | None = typer.Option(None, "--priority", help="with --jobs: the WorkloadPriorityClass"),
    agent_cmd: str | None = typer.Option(None, "--agent-cmd", help="with --jobs: the CLI agent each Job runs"),
    image: str | None = typer.Option(None, "--image", help="with --jobs: the container image holding the agent"),
    gateway_url: str | None = typer.Option(None, "--gateway-url", help="with --jobs: the gateway as pods reach it"),
    timeout: float | None = typer.Option(None, "--timeout", help="with --jobs: seconds per session"),
    requests: str | None = typer.Option(
        None, "--requests", help="with --jobs: each session's requests over hands.cpu/memory (cpu=N,memory=Q,NAME=N)"
    ),
) -> None:
    """The queues as Kueue v1beta2 YAML (ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
    WorkloadPriorityClasses); with --jobs, one suspended batch/v1 Job per session of a run's plan."""
    from agent_fleet.cli.queues_export import export_jobs, export_queues
    from agent_fleet.options import parse_requests

    try:
        if jobs:
            text = export_jobs(
                config,
                task=task,
                input_path=input,
                agents=agents,
                queue=queue,
                priority=priority,
                agent_cmd=agent_cmd,
                image=image,
                gateway_url=gateway_url,
                timeout=timeout,
                requests=parse_requests(requests),
            )
        else:
            text = export_queues(config)
        if out is None:
            typer.echo(text, nl=False)
        else:
            out.write_text(text)
    except FleetError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        typer.echo(f"error: {out}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(queues_app, name="queues")
