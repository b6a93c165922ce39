"""Read Kueue YAML as users write it.

``load_kueue_yaml`` accepts one multi-document YAML text (or a path to it), a list of
objects, or a ``kind: List``. Documents are read by the engine's one bounded YAML loader
(:func:`agent_fleet.config.load_yaml`: size, alias and node limits, so an alias bomb fails
fast), and every refusal is a :class:`ConfigError` naming the object and the field.
Unknown fields and kinds are kept as warnings, as ``kubectl`` would. Each object's ``spec``
is read field by field in :mod:`agent_fleet.admission.kueue_specs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_fleet.admission.kueue_export import per_session_quota
from agent_fleet.admission.kueue_specs import FieldContext, read_cluster_queue, read_cohort, read_local_queue
from agent_fleet.admission.objects import (
    FAIR_SHARING_STRATEGIES,
    ClusterQueue,
    Cohort,
    FairSharing,
    KueueObjects,
    LocalQueue,
    Namespace,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from agent_fleet.config import check_yaml_nodes, load_yaml, read_yaml_file
from agent_fleet.errors import ConfigError

__all__ = [
    "DEFAULT_CLUSTER_QUEUE",
    "DEFAULT_LOCAL_QUEUE",
    "default_objects",
    "load_kueue_yaml",
    "parse_fair_sharing",
    "parse_objects",
]

DEFAULT_CLUSTER_QUEUE = "default"
DEFAULT_LOCAL_QUEUE = "default"

_KNOWN_API = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1alpha1")
_CONFIG_API = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")


def _read_documents(source: str | Path) -> list[Any]:
    if isinstance(source, Path) or ("\n" not in source and len(source) < 4096 and Path(source).is_file()):
        path = Path(source)
        text = read_yaml_file(path, what="Kueue YAML")
        where = str(path)
    else:
        text, where = str(source), "Kueue YAML"
    return [d for d in load_yaml(text, source=where, all_documents=True) if d is not None]


def load_kueue_yaml(source: str | Path | Sequence[Mapping[str, Any]]) -> KueueObjects:
    """Objects from YAML text, a path to a YAML file, or an already loaded list of objects."""
    if isinstance(source, (str, Path)):
        docs: list[Any] = _read_documents(source)
    else:
        docs = list(source)
        check_yaml_nodes(docs, "Kueue objects")
    flat: list[Any] = []
    for doc in docs:
        if isinstance(doc, list):
            flat.extend(doc)
        elif isinstance(doc, Mapping) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            items = doc.get("items")
            if not isinstance(items, list):
                raise ConfigError(f"{doc.get('kind')}: items: must be a list")
            flat.extend(items)
        else:
            flat.append(doc)
    return parse_objects(flat)


def parse_objects(items: Sequence[Any]) -> KueueObjects:
    """Validate and convert plain objects (``apiVersion/kind/metadata/spec`` mappings)."""
    warnings: list[str] = []
    flavors: dict[str, ResourceFlavor] = {}
    cqs: dict[str, ClusterQueue] = {}
    lqs: dict[str, LocalQueue] = {}
    cohorts: dict[str, Cohort] = {}
    classes: dict[str, WorkloadPriorityClass] = {}
    namespaces: dict[str, Namespace] = {}
    fair_sharing: FairSharing | None = None
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigError(f"object #{index + 1}: must be a mapping with apiVersion, kind, metadata")
        kind = item.get("kind")
        meta = item.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(kind, str) or not kind:
            raise ConfigError(f"object #{index + 1}: kind: required")
        if kind == "Configuration":
            # Kueue's manager configuration carries no metadata; only fairSharing decides admission.
            if fair_sharing is not None:
                raise ConfigError(f"object #{index + 1}: Configuration: only one is allowed")
            fair_sharing = _configuration(item, f"object #{index + 1}", warnings)
            continue
        ctx = FieldContext(kind, str(name) if name is not None else f"#{index + 1}", warnings)
        if not isinstance(name, str) or not name or not isinstance(meta, Mapping):
            raise ctx.fail("metadata.name", "required")
        api = item.get("apiVersion")
        if kind != "Namespace" and api is not None and api not in _KNOWN_API:
            warnings.append(f"{kind} {name!r}: apiVersion {api!r} is not a Kueue version; read as v1beta2")
        ctx.warn_unknown(
            item,
            {
                "apiVersion",
                "kind",
                "metadata",
                "spec",
                "status",
                "value",
                "description",
                "globalDefault",
                "preemptionPolicy",
            },
            "",
        )
        spec = ctx.mapping(item.get("spec"), "spec")
        if kind == "ResourceFlavor":
            _put(flavors, name, ResourceFlavor(name=name), ctx)
        elif kind == "ClusterQueue":
            _put(cqs, name, read_cluster_queue(ctx, name, spec), ctx)
        elif kind == "Cohort":
            _put(cohorts, name, read_cohort(ctx, name, spec), ctx)
        elif kind == "LocalQueue":
            lq = read_local_queue(ctx, name, meta, spec)
            _put(lqs, lq.key, lq, ctx)
        elif kind == "WorkloadPriorityClass":
            if "value" not in item:
                raise ctx.fail("value", "required")
            _put(classes, name, WorkloadPriorityClass(name=name, value=ctx.integer(item["value"], "value")), ctx)
        elif kind == "Namespace":
            labels = ctx.mapping(meta.get("labels"), "metadata.labels")
            pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
            _put(namespaces, name, Namespace(name=name, labels=pairs), ctx)
        else:
            warnings.append(f"{kind} {name!r}: kind not used by admission; ignored")
    objects = KueueObjects(
        flavors=flavors,
        cluster_queues=cqs,
        local_queues=lqs,
        cohorts=cohorts,
        priority_classes=classes,
        namespaces=namespaces,
        fair_sharing=fair_sharing,
    )
    _check_references(objects, warnings)
    return replace(objects, warnings=tuple(warnings))


def _put(table: dict[str, Any], key: str, value: Any, ctx: FieldContext) -> None:
    if key in table:
        raise ctx.fail("metadata.name", f"duplicate {ctx.kind} {key!r}")
    table[key] = value


def _check_references(objects: KueueObjects, warnings: list[str]) -> None:
    for cq in objects.cluster_queues.values():
        for group in cq.resource_groups:
            for fq in group.flavors:
                if fq.name not in objects.flavors:
                    warnings.append(
                        f"ClusterQueue {cq.name!r}: ResourceFlavor {fq.name!r} is not defined; "
                        "the ClusterQueue is inactive until it is (Kueue's FlavorNotFound)"
                    )
    for lq in objects.local_queues.values():
        if lq.cluster_queue not in objects.cluster_queues:
            warnings.append(f"LocalQueue {lq.key!r}: ClusterQueue {lq.cluster_queue!r} does not exist")
    # A cycle of parents would make every quota in it undefined: refuse it.
    for start in objects.cohorts:
        seen = [start]
        node = objects.cohorts[start].parent
        while node is not None and node in objects.cohorts:
            if node in seen:
                raise ConfigError(f"Cohort {start!r}: spec.parentName: cycle {' -> '.join([*seen, node])}")
            seen.append(node)
            node = objects.cohorts[node].parent


def parse_fair_sharing(raw: Any, where: str, *, enabled: bool = False) -> FairSharing:
    """``fairSharing: {enable, preemptionStrategies}`` as Kueue's configuration spells it;
    ``enabled`` is what a missing ``enable`` means (v1beta2 has no such field: it is on)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: fairSharing: must be a mapping")
    for key in raw:
        if key not in ("enable", "preemptionStrategies"):
            raise ConfigError(f"{where}: fairSharing.{key}: unknown field")
    enable = raw.get("enable", enabled)
    if not isinstance(enable, bool):
        raise ConfigError(f"{where}: fairSharing.enable: must be true or false")
    strategies = raw.get("preemptionStrategies") or []
    if not isinstance(strategies, list) or not all(isinstance(x, str) for x in strategies):
        raise ConfigError(f"{where}: fairSharing.preemptionStrategies: must be a list of strategy names")
    chosen = tuple(strategies) or FAIR_SHARING_STRATEGIES[-1]
    if chosen not in FAIR_SHARING_STRATEGIES:
        allowed = "; ".join("[" + ", ".join(s) + "]" for s in FAIR_SHARING_STRATEGIES)
        raise ConfigError(f"{where}: fairSharing.preemptionStrategies: must be one of {allowed}")
    return FairSharing(enable=enable, preemption_strategies=chosen)


# Kueue feature gates this admission controller follows, and the FairSharing field each sets.
_GATES = {
    "FairSharingPreemptWithinNominal": "preempt_within_nominal",
    "FairSharingPrioritizeNonBorrowing": "prioritize_non_borrowing",
}


def _configuration(item: Mapping[str, Any], where: str, warnings: list[str]) -> FairSharing:
    api = item.get("apiVersion")
    if api is not None and api not in _CONFIG_API:
        warnings.append(f"Configuration {where}: apiVersion {api!r} is not Kueue's configuration API; read as v1beta1")
    for key in item:
        if key not in ("apiVersion", "kind", "fairSharing", "featureGates"):
            warnings.append(f"Configuration {where}: field {key} does not decide admission; ignored")
    gates = item.get("featureGates") or {}
    if not isinstance(gates, Mapping):
        raise ConfigError(f"Configuration {where}: featureGates: must be a mapping of gate names to true/false")
    chosen: dict[str, bool] = {}
    for gate, value in gates.items():
        if not isinstance(value, bool):
            raise ConfigError(f"Configuration {where}: featureGates.{gate}: must be true or false")
        if gate in _GATES:
            chosen[_GATES[gate]] = value
        else:
            warnings.append(f"Configuration {where}: feature gate {gate} does not decide admission here; ignored")
    fs = FairSharing()
    if item.get("fairSharing") is not None:
        # config.kueue.x-k8s.io/v1beta2 dropped fairSharing.enable: the block's presence turns it on
        # (Kueue converts a v1beta1 block with enable false to none at all).
        v1beta2 = api == _CONFIG_API[1]
        if v1beta2 and isinstance(item["fairSharing"], Mapping) and "enable" in item["fairSharing"]:
            warnings.append(f"Configuration {where}: fairSharing.enable is not a v1beta2 field; ignored (on)")
            item = {**item, "fairSharing": {k: v for k, v in item["fairSharing"].items() if k != "enable"}}
        fs = parse_fair_sharing(item["fairSharing"], f"Configuration {where}", enabled=v1beta2)
    return replace(
        fs,
        preempt_within_nominal=chosen.get("preempt_within_nominal", fs.preempt_within_nominal),
        prioritize_non_borrowing=chosen.get("prioritize_non_borrowing", fs.prioritize_non_borrowing),
    )


def default_objects(concurrency: int, *, per_session: Mapping[str, Any] | None = None) -> KueueObjects:
    """One ClusterQueue ``default`` whose ``pods`` quota is the run's concurrency, and LocalQueue ``default``.

    ``per_session`` (resource -> one session's request, e.g. its sandbox's ``cpu`` and ``memory``)
    adds those resources to the queue, each with ``concurrency`` sessions' worth of quota: the same
    sessions fit, and a Kubernetes Job requesting them is admitted by Kueue, which holds back any
    workload that requests a resource its ClusterQueue does not cover."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency: must be a positive integer, got {concurrency!r}")
    extra = {r: v for r, v in (per_session or {}).items() if r != "pods"}
    quotas = [{"name": "pods", "nominalQuota": concurrency}]
    for resource, request in extra.items():
        try:
            quotas.append({"name": resource, "nominalQuota": per_session_quota(resource, request, concurrency)})
        except ValueError as exc:
            raise ConfigError(f"per-session {resource} request: {exc}") from None
    return parse_objects(
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": DEFAULT_CLUSTER_QUEUE},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [q["name"] for q in quotas],
                            "flavors": [{"name": "default", "resources": quotas}],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": DEFAULT_LOCAL_QUEUE, "namespace": "default"},
                "spec": {"clusterQueue": DEFAULT_CLUSTER_QUEUE},
            },
        ]
    )
