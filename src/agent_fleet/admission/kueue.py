"""Read Kueue YAML as users write it.

``load_kueue_yaml`` accepts one multi-document YAML text (or a path to it), a list of
objects, or a ``kind: List``. Documents are read by the engine's one bounded YAML loader
(:func:`agent_fleet.config.load_yaml`: size, alias and node limits, so an alias bomb fails
fast), and every refusal is a :class:`ConfigError` naming the object and the field.
Unknown fields and kinds are kept as warnings, as ``kubectl`` would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_fleet.admission.objects import (
    BEST_EFFORT_FIFO,
    FAIR_SHARING_STRATEGIES,
    STRICT_FIFO,
    ClusterQueue,
    Cohort,
    FairSharing,
    FlavorFungibility,
    FlavorQuotas,
    KueueObjects,
    LabelSelector,
    LocalQueue,
    Namespace,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WorkloadPriorityClass,
)
from agent_fleet.admission.quantity import parse_decimal, parse_quantity
from agent_fleet.config import load_yaml, read_yaml_file
from agent_fleet.errors import ConfigError

__all__ = [
    "DEFAULT_CLUSTER_QUEUE",
    "DEFAULT_LOCAL_QUEUE",
    "default_objects",
    "load_kueue_yaml",
    "parse_fair_sharing",
    "parse_objects",
]

MAX_TEXT_BYTES = 8 * 1024 * 1024
MAX_NODES = 500_000
DEFAULT_CLUSTER_QUEUE = "default"
DEFAULT_LOCAL_QUEUE = "default"

_POLICIES_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_POLICIES_RECLAIM = ("Never", "LowerPriority", "Any")
_KNOWN_API = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1alpha1")
_CONFIG_API = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")


class _Ctx:
    """Where in which object we are, for error messages, and the warnings collected so far."""

    def __init__(self, kind: str, name: str, warnings: list[str]) -> None:
        self.kind, self.name, self.warnings = kind, name, warnings

    def fail(self, path: str, why: str) -> ConfigError:
        return ConfigError(f"{self.kind} {self.name!r}: {path}: {why}")

    def warn_unknown(self, data: Mapping[str, Any], known: set[str], path: str) -> None:
        for key in data:
            if key not in known:
                self.warnings.append(f"{self.kind} {self.name!r}: unknown field {path}.{key} ignored")

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, "must be a mapping")
        return value

    def seq(self, value: Any, path: str) -> Sequence[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, "must be a list")
        return value

    def name_str(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, "must be a non-empty string")
        return value

    def integer(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, "must be an integer")
        return value

    def quantity(self, resource: str, value: Any, path: str) -> int:
        try:
            count = parse_quantity(resource, value)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None
        if count < 0:
            raise self.fail(path, "must be non-negative")
        return count

    def enum(self, value: Any, allowed: Sequence[str], path: str, default: str) -> str:
        if value is None:
            return default
        if value not in allowed:
            raise self.fail(path, f"must be one of {', '.join(allowed)}")
        return str(value)


def _bounded(obj: Any) -> None:
    """Refuse structures with more than MAX_NODES nodes, counting shared (aliased) nodes each time."""
    seen = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ConfigError(f"Kueue YAML too large: more than {MAX_NODES} nodes (aliases expanded)")
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _read_documents(source: str | Path) -> list[Any]:
    if isinstance(source, Path) or ("\n" not in source and len(source) < 4096 and Path(source).is_file()):
        path = Path(source)
        text = read_yaml_file(path, what="Kueue YAML")
        where = str(path)
    else:
        text, where = str(source), "Kueue YAML"
    docs = [d for d in load_yaml(text, source=where, all_documents=True) if d is not None]
    _bounded(docs)
    return docs


def load_kueue_yaml(source: str | Path | Sequence[Mapping[str, Any]]) -> KueueObjects:
    """Objects from YAML text, a path to a YAML file, or an already loaded list of objects."""
    if isinstance(source, (str, Path)):
        docs: list[Any] = _read_documents(source)
    else:
        docs = list(source)
        _bounded(docs)
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
        ctx = _Ctx(kind, str(name) if name is not None else f"#{index + 1}", warnings)
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
            _put(cqs, name, _cluster_queue(ctx, name, spec), ctx)
        elif kind == "Cohort":
            _put(cohorts, name, _cohort(ctx, name, spec), ctx)
        elif kind == "LocalQueue":
            lq = _local_queue(ctx, name, meta, spec)
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
        warnings=(),
    )
    _check_references(objects, warnings)
    return KueueObjects(
        flavors=flavors,
        cluster_queues=cqs,
        local_queues=lqs,
        cohorts=cohorts,
        priority_classes=classes,
        namespaces=namespaces,
        fair_sharing=fair_sharing,
        warnings=tuple(warnings),
    )


def _put(table: dict[str, Any], key: str, value: Any, ctx: _Ctx) -> None:
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


def parse_fair_sharing(raw: Any, where: str) -> FairSharing:
    """``fairSharing: {enable, preemptionStrategies}`` as Kueue's configuration spells it."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: fairSharing: must be a mapping")
    for key in raw:
        if key not in ("enable", "preemptionStrategies"):
            raise ConfigError(f"{where}: fairSharing.{key}: unknown field")
    enable = raw.get("enable", False)
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
    fs = parse_fair_sharing(item["fairSharing"], f"Configuration {where}") if "fairSharing" in item else FairSharing()
    return replace(
        fs,
        preempt_within_nominal=chosen.get("preempt_within_nominal", fs.preempt_within_nominal),
        prioritize_non_borrowing=chosen.get("prioritize_non_borrowing", fs.prioritize_non_borrowing),
    )


def _fair_weight(ctx: _Ctx, spec: Mapping[str, Any]) -> float:
    fs = ctx.mapping(spec.get("fairSharing"), "spec.fairSharing")
    ctx.warn_unknown(fs, {"weight"}, "spec.fairSharing")
    if fs.get("weight") is None:
        return 1.0
    try:
        weight = parse_decimal(fs["weight"])
    except ValueError as exc:
        raise ctx.fail("spec.fairSharing.weight", str(exc)) from None
    if weight < 0:
        raise ctx.fail("spec.fairSharing.weight", "must be non-negative")
    return float(weight)


def _selector(ctx: _Ctx, raw: Any, path: str) -> LabelSelector:
    data = ctx.mapping(raw, path)
    ctx.warn_unknown(data, {"matchLabels", "matchExpressions"}, path)
    labels = ctx.mapping(data.get("matchLabels"), f"{path}.matchLabels")
    exprs = []
    for i, expr in enumerate(ctx.seq(data.get("matchExpressions"), f"{path}.matchExpressions")):
        epath = f"{path}.matchExpressions[{i}]"
        e = ctx.mapping(expr, epath)
        op = ctx.enum(e.get("operator"), ("In", "NotIn", "Exists", "DoesNotExist"), f"{epath}.operator", "")
        values = tuple(str(v) for v in ctx.seq(e.get("values"), f"{epath}.values"))
        exprs.append((ctx.name_str(e.get("key"), f"{epath}.key"), op, values))
    return LabelSelector(
        match_labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())), match_expressions=tuple(exprs)
    )


def _resource_groups(ctx: _Ctx, raw: Any, path: str, *, has_parent: bool) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for gi, graw in enumerate(ctx.seq(raw, path)):
        gpath = f"{path}[{gi}]"
        g = ctx.mapping(graw, gpath)
        ctx.warn_unknown(g, {"coveredResources", "flavors"}, gpath)
        covered = [
            ctx.name_str(r, f"{gpath}.coveredResources[{i}]")
            for i, r in enumerate(ctx.seq(g.get("coveredResources"), f"{gpath}.coveredResources"))
        ]
        if not covered:
            raise ctx.fail(f"{gpath}.coveredResources", "must list at least one resource")
        for r in covered:
            if r in seen_resources:
                raise ctx.fail(f"{gpath}.coveredResources", f"resource {r!r} is in more than one resource group")
            seen_resources.add(r)
        flavors: list[FlavorQuotas] = []
        for fi, fraw in enumerate(ctx.seq(g.get("flavors"), f"{gpath}.flavors")):
            fpath = f"{gpath}.flavors[{fi}]"
            f = ctx.mapping(fraw, fpath)
            ctx.warn_unknown(f, {"name", "resources"}, fpath)
            fname = ctx.name_str(f.get("name"), f"{fpath}.name")
            if fname in seen_flavors:
                raise ctx.fail(f"{fpath}.name", f"flavor {fname!r} is in more than one resource group")
            seen_flavors.add(fname)
            quotas = [
                _quota(ctx, q, f"{fpath}.resources[{qi}]", has_parent=has_parent)
                for qi, q in enumerate(ctx.seq(f.get("resources"), f"{fpath}.resources"))
            ]
            if [q.name for q in quotas] != covered:
                raise ctx.fail(f"{fpath}.resources", f"must list exactly the coveredResources {covered} in order")
            flavors.append(FlavorQuotas(name=fname, resources=tuple(quotas)))
        if not flavors:
            raise ctx.fail(f"{gpath}.flavors", "must list at least one flavor")
        groups.append(ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors)))
    return tuple(groups)


def _quota(ctx: _Ctx, raw: Any, path: str, *, has_parent: bool) -> ResourceQuota:
    q = ctx.mapping(raw, path)
    ctx.warn_unknown(q, {"name", "nominalQuota", "borrowingLimit", "lendingLimit"}, path)
    rname = ctx.name_str(q.get("name"), f"{path}.name")
    if "nominalQuota" not in q:
        raise ctx.fail(f"{path}.nominalQuota", "required")
    nominal = ctx.quantity(rname, q["nominalQuota"], f"{path}.nominalQuota")
    borrowing = lending = None
    if q.get("borrowingLimit") is not None:
        if not has_parent:
            raise ctx.fail(f"{path}.borrowingLimit", "must be unset without a cohort (parent)")
        borrowing = ctx.quantity(rname, q["borrowingLimit"], f"{path}.borrowingLimit")
    if q.get("lendingLimit") is not None:
        if not has_parent:
            raise ctx.fail(f"{path}.lendingLimit", "must be unset without a cohort (parent)")
        lending = ctx.quantity(rname, q["lendingLimit"], f"{path}.lendingLimit")
        if lending > nominal:
            raise ctx.fail(f"{path}.lendingLimit", "must be less than or equal to nominalQuota")
    return ResourceQuota(name=rname, nominal=nominal, borrowing_limit=borrowing, lending_limit=lending)


def _cluster_queue(ctx: _Ctx, name: str, spec: Mapping[str, Any]) -> ClusterQueue:
    ctx.warn_unknown(
        spec,
        {
            "resourceGroups",
            "cohort",
            "cohortName",
            "queueingStrategy",
            "preemption",
            "namespaceSelector",
            "flavorFungibility",
            "stopPolicy",
            "fairSharing",
            "admissionChecks",
            "admissionChecksStrategy",
            "admissionScope",
        },
        "spec",
    )
    cohort_a, cohort_b = spec.get("cohortName"), spec.get("cohort")
    if cohort_a and cohort_b and cohort_a != cohort_b:
        raise ctx.fail("spec.cohortName", f"disagrees with spec.cohort ({cohort_a!r} vs {cohort_b!r})")
    cohort = cohort_a or cohort_b or None
    if cohort is not None:
        cohort = ctx.name_str(cohort, "spec.cohortName")
    groups = _resource_groups(ctx, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=cohort is not None)
    strategy = ctx.enum(
        spec.get("queueingStrategy"), (STRICT_FIFO, BEST_EFFORT_FIFO), "spec.queueingStrategy", BEST_EFFORT_FIFO
    )
    pre = ctx.mapping(spec.get("preemption"), "spec.preemption")
    ctx.warn_unknown(pre, {"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"}, "spec.preemption")
    bwc = ctx.mapping(pre.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    ctx.warn_unknown(bwc, {"policy", "maxPriorityThreshold"}, "spec.preemption.borrowWithinCohort")
    threshold = bwc.get("maxPriorityThreshold")
    preemption = Preemption(
        within_cluster_queue=ctx.enum(
            pre.get("withinClusterQueue"), _POLICIES_WITHIN, "spec.preemption.withinClusterQueue", "Never"
        ),
        reclaim_within_cohort=ctx.enum(
            pre.get("reclaimWithinCohort"), _POLICIES_RECLAIM, "spec.preemption.reclaimWithinCohort", "Never"
        ),
        borrow_within_cohort=ctx.enum(
            bwc.get("policy"), ("Never", "LowerPriority"), "spec.preemption.borrowWithinCohort.policy", "Never"
        ),
        max_priority_threshold=None
        if threshold is None
        else ctx.integer(threshold, "spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
    )
    if preemption.reclaim_within_cohort == "Never" and preemption.borrow_within_cohort != "Never":
        raise ctx.fail("spec.preemption.borrowWithinCohort.policy", "requires reclaimWithinCohort other than Never")
    if "namespaceSelector" not in spec:
        ctx.warnings.append(
            f"ClusterQueue {name!r}: no spec.namespaceSelector; every namespace is admitted "
            "(write namespaceSelector: {} to say so, or null to admit none)"
        )
        selector: LabelSelector | None = LabelSelector()
    elif spec["namespaceSelector"] is None:
        selector = None
    else:
        selector = _selector(ctx, spec["namespaceSelector"], "spec.namespaceSelector")
    fung = ctx.mapping(spec.get("flavorFungibility"), "spec.flavorFungibility")
    ctx.warn_unknown(fung, {"whenCanBorrow", "whenCanPreempt", "preference"}, "spec.flavorFungibility")
    policy = ("MayStopSearch", "TryNextFlavor", "Borrow", "Preempt")
    when_borrow = ctx.enum(fung.get("whenCanBorrow"), policy, "spec.flavorFungibility.whenCanBorrow", "MayStopSearch")
    when_preempt = ctx.enum(
        fung.get("whenCanPreempt"), policy, "spec.flavorFungibility.whenCanPreempt", "TryNextFlavor"
    )
    preference = fung.get("preference")
    if preference is not None:
        preference = ctx.enum(
            preference, ("BorrowingOverPreemption", "PreemptionOverBorrowing"), "spec.flavorFungibility.preference", ""
        )
    return ClusterQueue(
        name=name,
        cohort=cohort,
        resource_groups=groups,
        queueing_strategy=strategy,
        preemption=preemption,
        namespace_selector=selector,
        flavor_fungibility=FlavorFungibility(
            when_can_borrow="TryNextFlavor" if when_borrow == "TryNextFlavor" else "MayStopSearch",
            when_can_preempt="TryNextFlavor" if when_preempt == "TryNextFlavor" else "MayStopSearch",
            preference=preference,
        ),
        stop_policy=ctx.enum(spec.get("stopPolicy"), ("None", "Hold", "HoldAndDrain"), "spec.stopPolicy", "None"),
        fair_weight=_fair_weight(ctx, spec),
    )


def _cohort(ctx: _Ctx, name: str, spec: Mapping[str, Any]) -> Cohort:
    ctx.warn_unknown(spec, {"parentName", "parent", "resourceGroups", "fairSharing"}, "spec")
    parent = spec.get("parentName") or spec.get("parent") or None
    if parent is not None:
        parent = ctx.name_str(parent, "spec.parentName")
        if parent == name:
            raise ctx.fail("spec.parentName", "a Cohort cannot be its own parent")
    groups = _resource_groups(ctx, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=parent is not None)
    return Cohort(name=name, parent=parent, resource_groups=groups, fair_weight=_fair_weight(ctx, spec))


def _local_queue(ctx: _Ctx, name: str, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> LocalQueue:
    ctx.warn_unknown(spec, {"clusterQueue", "stopPolicy", "fairSharing"}, "spec")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ctx.fail("metadata.namespace", "must be a string")
    return LocalQueue(
        namespace=namespace, name=name, cluster_queue=ctx.name_str(spec.get("clusterQueue"), "spec.clusterQueue")
    )


def default_objects(concurrency: int) -> KueueObjects:
    """One ClusterQueue ``default`` whose ``pods`` quota is the run's concurrency, and LocalQueue ``default``."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency: must be a positive integer, got {concurrency!r}")
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
                            "coveredResources": ["pods"],
                            "flavors": [
                                {"name": "default", "resources": [{"name": "pods", "nominalQuota": concurrency}]}
                            ],
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
