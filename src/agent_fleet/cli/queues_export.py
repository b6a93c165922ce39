"""``agent-fleet queues export``: the queues a run is admitted by, and the sandbox Jobs of a run's
plan, as YAML for a cluster with Kueue.

The queues are those of ``--config``: a fleet.yaml's ``queues:`` (a file beside it, or inline), a
Kueue YAML file, or a ``queues simulate`` scenario's objects. A fleet.yaml without ``queues:`` (or no
``--config``) gives the queue ``serve`` admits by: ClusterQueue ``default`` with a ``pods`` quota of
``rate_limit.baseline_concurrency``, written with ``cpu`` and ``memory`` quotas of that many sandboxes
(fleet.yaml ``hands.cpu``, ``hands.memory``) too, since the Jobs request them and Kueue holds back a
Job that requests a resource its ClusterQueue does not cover.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from agent_fleet.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from agent_fleet.admission.objects import KueueObjects
    from agent_fleet.config import FleetConfig
    from agent_fleet.hands.resources import ResourceSpec

__all__ = ["export_jobs", "export_queues"]


def _sandbox(fleet: FleetConfig) -> ResourceSpec:
    from agent_fleet.hands.resources import ResourceSpec

    return ResourceSpec.of({"cpu": fleet.hands.cpu, "memory": fleet.hands.memory})


def _default(fleet: FleetConfig) -> KueueObjects:
    from agent_fleet.engine.preflight import default_queue_objects

    return default_queue_objects(fleet.rate_limit.baseline_concurrency, fleet)


def _objects(config: Path | None) -> KueueObjects:
    from agent_fleet.cli.queues import load_queue_config
    from agent_fleet.config import FleetConfig

    objects = _default(FleetConfig()) if config is None else load_queue_config(config, default=_default)
    for warning in objects.warnings:
        typer.echo(f"warning: {warning}", err=True)
    return objects


def _fleet(config: Path | None) -> FleetConfig:
    """The fleet.yaml settings the Jobs use (hands, dispatch); defaults when ``config`` is Kueue YAML."""
    from collections.abc import Mapping

    from agent_fleet.config import FleetConfig, load_config, load_yaml, read_yaml_file

    if config is None:
        return FleetConfig()
    first = load_yaml(read_yaml_file(config), source=str(config))
    if first is None or (isinstance(first, Mapping) and "kind" not in first and "objects" not in first):
        return load_config(config)
    return FleetConfig()


def export_queues(config: Path | None) -> str:
    """The Kueue v1beta2 YAML of ``config``'s queues (one document per object)."""
    from agent_fleet.admission.kueue_export import dump_yaml, export_objects

    docs = export_objects(_objects(config))
    return dump_yaml(docs, header="Kueue v1beta2 objects written by agent-fleet queues export")


def _checked_secret_free(text: str) -> str:
    """Refuse output holding the value of any credential variable of this environment."""
    from agent_fleet.hands.isolation import forbidden_values

    if any(value in text for value in forbidden_values()):
        raise ConfigError("the Jobs would carry a credential of this environment (in --task or --agent-cmd); refused")
    return text


def export_jobs(
    config: Path | None,
    *,
    task: str | None,
    input_path: str | None,
    agents: int,
    queue: str | None,
    priority: str | None,
    agent_cmd: str | None,
    image: str | None,
    gateway_url: str | None,
    timeout: float | None,
    requests: dict[str, str] | None = None,
) -> str:
    """One ConfigMap and one suspended Job per session of the plan ``deploy`` would make. Each Job's
    container requests what a session of ``deploy`` requests for admission: fleet.yaml ``hands.cpu`` and
    ``hands.memory``, ``requests`` over them (a resource other than cpu and memory with its limit equal
    to its request, as Kubernetes wants of extended resources)."""
    from agent_fleet.admission import AdmissionController
    from agent_fleet.admission.kueue_export import dump_yaml, kube_quantity
    from agent_fleet.admission.kueue_jobs import (
        ANALYTICS_PATH,
        PARTITION_PATH,
        SandboxJobSpec,
        sandbox_jobs,
        uncovered_resources,
    )
    from agent_fleet.clock import RealClock
    from agent_fleet.domain.ids import new_run_id
    from agent_fleet.engine import RunOptions, check_run_options, plan_run
    from agent_fleet.hands.cli_agents import QUIET_ENV, render_command
    from agent_fleet.hands.resources import ResourceSpec
    from agent_fleet.options import with_config

    needed = (("--task", task), ("--agent-cmd", agent_cmd), ("--image", image), ("--gateway-url", gateway_url))
    for flag, value in needed:
        if not value:
            raise UsageError(f"--jobs needs {flag}: every Job runs a CLI agent against the gateway")
    assert task and agent_cmd and image and gateway_url  # checked just above
    if agents < 1:
        raise UsageError(f"--agents must be at least 1, got {agents}")
    objects, fleet = _objects(config), _fleet(config)
    local_queue = objects.resolve_local_queue(queue or "default")
    if local_queue is None:
        known = ", ".join(sorted(objects.local_queues)) or "none"
        raise ConfigError(f"unknown --queue {queue or 'default'!r}: no such LocalQueue (known: {known})")
    if priority is not None and priority not in objects.priority_classes:
        known = ", ".join(sorted(objects.priority_classes)) or "none"
        raise ConfigError(f"unknown --priority {priority!r}: no such WorkloadPriorityClass (known: {known})")
    asked = requests or {}
    sandbox = ResourceSpec.of(
        {"cpu": asked.get("cpu", fleet.hands.cpu), "memory": asked.get("memory", fleet.hands.memory)}
    )  # limits: requests × headroom, as a session's own sandbox
    quantities: dict[str, dict[str, int | str]] = {
        kind: {"cpu": kube_quantity("cpu", round(r.cpu * 1000)), "memory": kube_quantity("memory", r.memory)}
        for kind, r in (("requests", sandbox.requests), ("limits", sandbox.effective_limits))
    }
    options = RunOptions(
        task=task,
        input_path=input_path,
        agents=agents,
        queue=queue,
        priority=priority,
        requests=requests,
        config_path=str(config) if config else None,
    )
    check_run_options(options, fleet, AdmissionController(objects, RealClock(), with_metrics=False))
    for name, value in asked.items():
        if name not in ("pods", "cpu", "memory"):  # one pod per Job (Kueue counts it); cpu and memory above
            quantities["requests"][name] = quantities["limits"][name] = value  # extended: limit = request
    for resource in uncovered_resources(objects, local_queue, list(quantities["requests"])):
        typer.echo(
            f"warning: ClusterQueue {local_queue.cluster_queue!r} does not cover {resource}: Kueue keeps these "
            f"Jobs pending (resource {resource} unavailable in ClusterQueue) until its resourceGroups cover it",
            err=True,
        )
    plan = plan_run(with_config(options, fleet))  # the plan deploy makes (a goal: its one-session plan)
    for note in plan.notes:
        typer.echo(f"note: {note}", err=True)
    command = render_command(agent_cmd, task=task, partition_file=PARTITION_PATH, analytics_log=ANALYTICS_PATH)
    spec = SandboxJobSpec(
        image=image,
        command=command,
        task=task,
        gateway_url=gateway_url,
        requests=quantities["requests"],
        limits=quantities["limits"],
        env=QUIET_ENV,
        timeout_s=timeout,
        backoff_limit=fleet.dispatch.max_reassignments,
    )
    run_id = new_run_id()
    docs = sandbox_jobs(run_id, plan.partitions, queue=local_queue, priority_class=priority, spec=spec)
    header = f"Sandbox Jobs of run {run_id} ({len(plan.partitions)} sessions), written by agent-fleet queues export"
    return _checked_secret_free(dump_yaml(docs, header=header))
