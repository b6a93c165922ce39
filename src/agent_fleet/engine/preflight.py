"""What would fail a run once started, checked before it is recorded: the embedder, fleet.yaml, the
queues file, the queue and priority names; and the Kueue objects a run is admitted by."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_fleet.admission import KueueObjects, default_objects, load_kueue_yaml
from agent_fleet.config import FleetConfig
from agent_fleet.errors import ConfigError, UsageError
from agent_fleet.options import RunOptions

__all__ = ["EMBEDDERS", "admission_objects", "check_embedder", "check_run_options", "configured_queues"]

EMBEDDERS = ("auto", "lexical", "minilm", "local", "provider")


def configured_queues(config: FleetConfig, config_path: str | None) -> KueueObjects | None:
    """The Kueue objects of fleet.yaml ``queues:`` (a file beside it, or inline); None without it.
    Reads the file: call it off the event loop. Raises ConfigError (one line)."""
    if config.queues is None:
        return None
    source: Any = config.queues
    if isinstance(source, str) and "\n" not in source.strip():
        path = Path(source)
        if config_path and not path.is_absolute():
            path = Path(config_path).resolve().parent / path
        if not path.is_file():
            raise ConfigError(f"{config_path or 'fleet.yaml'}: queues: no such file {str(path)!r}")
        source = path
    return load_kueue_yaml(source)


def admission_objects(options: RunOptions, config: FleetConfig) -> KueueObjects:
    """The Kueue objects a run is admitted by: fleet.yaml ``queues:``, else the default ClusterQueue
    sized to the run. Raises ConfigError (one line)."""
    return configured_queues(config, options.config_path) or default_objects(options.agents)


def check_embedder(options: RunOptions) -> None:
    """Raise UsageError (exit 2) unless ``--embedder`` names a known embedder."""
    if options.embedder not in EMBEDDERS:
        raise UsageError(f"unknown embedder {options.embedder!r}: use auto, lexical, minilm or provider")


def check_run_options(options: RunOptions, config: FleetConfig) -> None:
    """What would fail a run once started, found before it is recorded: its --embedder, fleet.yaml,
    the queues file, the --queue and --priority names. Raises ConfigError/UsageError (exit 2)."""
    check_embedder(options)
    objects = admission_objects(options, config)
    queue = options.queue or "default"
    if objects.resolve_local_queue(queue) is None:
        known = ", ".join(sorted(objects.local_queues)) or "none"
        raise ConfigError(f"unknown --queue {queue!r}: no such LocalQueue (known: {known})")
    if options.priority is not None and options.priority not in objects.priority_classes:
        known = ", ".join(sorted(objects.priority_classes)) or "none"
        raise ConfigError(f"unknown --priority {options.priority!r}: no such WorkloadPriorityClass (known: {known})")
