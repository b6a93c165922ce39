"""What would fail a run once started, checked before it is recorded: the one check every door runs.

``deploy`` (and ``resume``), ``agent-fleet serve``'s REST API and so ``deploy --server``, its A2A agent,
the MCP tool and the LangGraph node all call :func:`check_run_options`, so they refuse the same runs
with the same words: an unknown embedder, agent format, model, queue or priority class, malformed or
unadmittable ``--requests``. The budgets' values are :class:`~agent_fleet.options.RunOptions`' own.

A session's requests for admission (:func:`session_requests`): ``pods`` 1, ``cpu`` and ``memory`` of
fleet.yaml ``hands`` (counted where the ClusterQueue covers them, as ``pods`` is), and ``--requests``
over them (counted as given: a resource the ClusterQueue does not cover is refused here, as Kueue would
never admit it) — the same requests ``queues export --jobs`` writes into each session's Job.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from agent_fleet.admission import AdmissionController, KueueObjects, Workload, default_objects, load_kueue_yaml
from agent_fleet.admission.quantity import parse_quantity
from agent_fleet.admission.workload_slots import AdmissionSlots
from agent_fleet.clock import RealClock
from agent_fleet.config import FleetConfig
from agent_fleet.engine.gitrepo import input_repo
from agent_fleet.engine.remotes import check_push_remote
from agent_fleet.errors import ConfigError, UsageError
from agent_fleet.hands.cli_formats import FORMATS
from agent_fleet.options import DEFAULT_MODEL, RunOptions

__all__ = [
    "EMBEDDERS",
    "OUT_MARKER",
    "admission_objects",
    "check_changes",
    "check_checks",
    "check_embedder",
    "check_push",
    "check_queue_budgets",
    "check_run_options",
    "claim_out_dir",
    "configured_queues",
    "default_queue_objects",
    "sandbox_requests",
    "session_requests",
    "session_slots",
]

# The file in a run's output directory that names the run writing there: a second run given the same
# --out is refused instead of overwriting the first one's outputs.
OUT_MARKER = ".fleet-run"

EMBEDDERS = ("auto", "lexical", "minilm", "local", "provider")


def configured_queues(config: FleetConfig, config_path: str | None) -> KueueObjects | None:
    """The Kueue objects of fleet.yaml ``queues:`` (a file beside it, or inline); None without it.
    Reads the file: call it off the event loop. Raises ConfigError (one line)."""
    if config.queues is None:
        return None
    return load_kueue_yaml(queues_source(config, config_path))


def queues_source(config: FleetConfig, config_path: str | None) -> Any:
    """What fleet.yaml ``queues:`` names: the Kueue file's path (ConfigError when missing), or the objects."""
    source: Any = config.queues
    if isinstance(source, str) and "\n" not in source.strip():
        path = Path(source)
        if config_path and not path.is_absolute():
            path = Path(config_path).resolve().parent / path
        if not path.is_file():
            raise ConfigError(f"{config_path or 'fleet.yaml'}: queues: no such file {str(path)!r}")
        return path
    return source


def sandbox_requests(config: FleetConfig) -> dict[str, str]:
    """One session's sandbox requests (fleet.yaml ``hands.cpu``, ``hands.memory``) as Kueue quantities."""
    return {"cpu": f"{round(config.hands.cpu * 1000)}m", "memory": config.hands.memory}


def default_queue_objects(concurrency: int, config: FleetConfig) -> KueueObjects:
    """Without fleet.yaml ``queues:``: ClusterQueue ``default`` holding ``concurrency`` sessions — its
    ``pods`` quota, and that many sandboxes' ``cpu`` and ``memory`` (what ``queues export`` writes)."""
    return default_objects(concurrency, per_session=sandbox_requests(config))


def admission_objects(options: RunOptions, config: FleetConfig) -> KueueObjects:
    """The Kueue objects a run is admitted by: fleet.yaml ``queues:``, else the default ClusterQueue
    sized to the run. Raises ConfigError (one line)."""
    return configured_queues(config, options.config_path) or default_queue_objects(options.agents, config)


def session_requests(options: RunOptions, config: FleetConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """(requests, defaults) of each of the run's sessions: see the module's docstring."""
    return {"pods": 1, **(options.requests or {})}, sandbox_requests(config)


def session_slots(
    controller: AdmissionController, options: RunOptions, config: FleetConfig, *, drive: bool = True
) -> AdmissionSlots:
    """The run's sessions as Workloads of ``controller``, each requesting :func:`session_requests`
    (``drive``: False when several runs share the controller and its owner drives it)."""
    requests, defaults = session_requests(options, config)
    return AdmissionSlots(
        controller,
        queue=options.queue or "default",
        priority_class=options.priority,
        requests=requests,
        defaults=defaults,
        drive=drive,
    )


def check_embedder(options: RunOptions) -> None:
    """Raise UsageError (exit 2) unless ``--embedder`` names a known embedder."""
    if options.embedder not in EMBEDDERS:
        raise UsageError(f"unknown embedder {options.embedder!r}: use auto, lexical, minilm or provider")


def _check_model(options: RunOptions, config: FleetConfig) -> None:
    """With fleet.yaml ``models:``, a model asked for is one of them (by name or model id) or an alias."""
    if not config.models or options.model == DEFAULT_MODEL or config.model(options.model) is not None:
        return
    if any(fnmatchcase(options.model, pattern) for pattern in config.aliases):
        return
    known = ", ".join(m.name for m in config.models)
    raise ConfigError(f"unknown --model {options.model!r}: fleet.yaml's models are {known}")


def check_queue_budgets(config: FleetConfig, objects: KueueObjects) -> None:
    """fleet.yaml ``budgets.queue_usd`` names LocalQueues (``ns/name``, or ``name`` in ``default``)."""
    for name in config.budgets.queue_usd:
        if objects.resolve_local_queue(name) is None:
            known = ", ".join(sorted(objects.local_queues)) or "none"
            raise ConfigError(f"budgets.queue_usd: no LocalQueue {name!r} (known: {known})")


def check_run_options(
    options: RunOptions, config: FleetConfig, controller: AdmissionController | None = None, *, git: bool = True
) -> None:
    """What would fail a run once started, found before it is recorded: its --embedder, --agent-format,
    --model, fleet.yaml, the queues file, the --queue and --priority names, its --requests (each a Kueue
    quantity, each covered by the queue's ClusterQueue, one session within what it can ever admit), its
    --check and --push (with ``git``: those run git, so a caller on an event loop may check them apart,
    in a thread: :func:`check_changes`). ``controller``: the one a server admits by (default: one over
    the run's own queues). Raises ConfigError/UsageError (exit 2)."""
    check_embedder(options)
    if options.agent_format not in FORMATS:
        raise UsageError(f"unknown --agent-format {options.agent_format!r} (choose from {', '.join(FORMATS)})")
    _check_model(options, config)
    objects = controller.objects if controller is not None else admission_objects(options, config)
    queue = options.queue or "default"
    local = objects.resolve_local_queue(queue)
    if local is None:
        known = ", ".join(sorted(objects.local_queues)) or "none"
        raise ConfigError(f"unknown --queue {queue!r}: no such LocalQueue (known: {known})")
    if options.priority is not None and options.priority not in objects.priority_classes:
        known = ", ".join(sorted(objects.priority_classes)) or "none"
        raise ConfigError(f"unknown --priority {options.priority!r}: no such WorkloadPriorityClass (known: {known})")
    check_queue_budgets(config, objects)
    requests, defaults = session_requests(options, config)
    _check_requests(options.requests or {}, local.cluster_queue, objects)
    if controller is None:
        controller = AdmissionController(objects, RealClock(), with_metrics=False)
    session = Workload(
        name="session", queue=queue, requests=requests, defaults=defaults, priority_class=options.priority
    )
    if controller.check(session) is not None:
        raise ConfigError(
            f"--requests: one session ({_shown({**defaults, **requests})}) is more than ClusterQueue "
            f"{local.cluster_queue!r} can ever admit (ExceedsMaxQuota)"
        )
    if git:
        check_changes(options)


def _check_requests(asked: Mapping[str, str], cluster_queue: str, objects: KueueObjects) -> None:
    spec = objects.cluster_queues.get(cluster_queue)
    for name, value in asked.items():
        try:
            count = parse_quantity(name, value)
        except ValueError as exc:
            raise UsageError(f"--requests {name}={value}: {exc}") from None
        if count < 0:
            raise UsageError(f"--requests {name}={value}: must not be negative")
        if name != "pods" and count and (spec is None or not spec.covers(name)):
            covered = sorted({r for g in spec.resource_groups for r in g.covered_resources}) if spec else []
            raise ConfigError(
                f"--requests {name}: ClusterQueue {cluster_queue!r} does not cover {name} "
                f"(it covers {', '.join(covered) or 'nothing'}), so Kueue would never admit the sessions"
            )


def _shown(requests: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(requests.items()))


def check_changes(options: RunOptions) -> None:
    """``--check`` and ``--push`` (each needs a git input). Raises UsageError (exit 2); runs git."""
    check_checks(options)
    check_push(options)


def check_push(options: RunOptions) -> None:
    """``--push`` needs the run's branches to live somewhere: a directory input inside a git repository,
    and a remote that is a URL without a password or one of that repository's remotes. Raises
    UsageError (exit 2). Runs git: call it off the event loop."""
    if not options.push:
        return
    repo = input_repo(options.input_path)
    if repo is None:
        raise UsageError("--push needs a directory input inside a git repository (its branches are pushed)")
    check_push_remote(repo.top, options.push)


def check_checks(options: RunOptions) -> None:
    """``--check`` needs changes to check: a directory input inside a git repository with a commit.
    Raises UsageError (exit 2) otherwise. Runs git: call it off the event loop."""
    if not options.check:
        return
    where = options.input_url or options.input_path
    if options.input_path is None:
        raise UsageError("--check needs --input: a directory inside a git repository (its changes are checked)")
    if input_repo(options.input_path) is None:
        raise UsageError(
            f"--check needs a directory input inside a git repository with a commit; {where} is not one "
            "(only changes to a git checkout are captured and checked)"
        )


def claim_out_dir(out_dir: str, run_id: str) -> None:
    """Make ``out_dir`` this run's output directory, before the run is recorded: it must be a
    directory that can be created and written, holding no other run's outputs. Raises UsageError
    (exit 2, one line). Does file I/O: call it off the event loop."""
    import json
    import os

    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot create it ({exc.strerror or exc})") from None
    marker = path / OUT_MARKER
    try:  # created exclusively: of two runs claiming one directory at once, one wins
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        owner = marker.read_text(encoding="utf-8").strip()
        if owner != run_id:
            raise UsageError(f"--out {out_dir} holds the outputs of run {owner}: give another --out") from None
        return
    except OSError as exc:
        raise UsageError(f"--out {out_dir}: cannot write in it ({exc.strerror or exc})") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(run_id + "\n")
    summary = path / "summary.json"
    if summary.is_file():  # outputs written before runs marked their directory
        try:
            other = json.loads(summary.read_text(encoding="utf-8")).get("run_id")
        except (OSError, ValueError, AttributeError):
            other = None
        if other and other != run_id:
            marker.unlink()
            raise UsageError(f"--out {out_dir} holds the outputs of run {other}: give another --out")
