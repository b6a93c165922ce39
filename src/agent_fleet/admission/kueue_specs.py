"""The spec of each Kueue object, field by field.

:class:`FieldContext` knows which object and field is being read, so every refusal is a
:class:`ConfigError` naming them, and it collects the warnings for unknown fields. The
readers below turn a ClusterQueue's, a Cohort's or a LocalQueue's ``spec`` (resource groups,
quotas, preemption, namespace selector, flavor fungibility, fair-sharing weight) into the
objects of :mod:`agent_fleet.admission.objects`; :mod:`agent_fleet.admission.kueue` drives them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from agent_fleet.admission.objects import (
    BEST_EFFORT_FIFO,
    STRICT_FIFO,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    Preemption,
    ResourceGroup,
    ResourceQuota,
)
from agent_fleet.admission.quantity import parse_decimal, parse_quantity
from agent_fleet.errors import ConfigError

__all__ = ["FieldContext", "read_cluster_queue", "read_cohort", "read_local_queue"]

_POLICIES_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_POLICIES_RECLAIM = ("Never", "LowerPriority", "Any")
_MIN_WEIGHT = Decimal("1e-9")


class FieldContext:
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


def _fair_weight(ctx: FieldContext, spec: Mapping[str, Any]) -> float:
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
    if 0 < weight <= _MIN_WEIGHT:
        raise ctx.fail("spec.fairSharing.weight", "must be 0 or above 10^-9 (Kueue refuses smaller weights)")
    return float(weight)


def _selector(ctx: FieldContext, raw: Any, path: str) -> LabelSelector:
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


def _resource_groups(ctx: FieldContext, raw: Any, path: str, *, has_parent: bool) -> tuple[ResourceGroup, ...]:
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


def _quota(ctx: FieldContext, raw: Any, path: str, *, has_parent: bool) -> ResourceQuota:
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


def read_cluster_queue(ctx: FieldContext, name: str, spec: Mapping[str, Any]) -> ClusterQueue:
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
        if (when_borrow, when_preempt) != ("TryNextFlavor", "TryNextFlavor"):
            raise ctx.fail(
                "spec.flavorFungibility.preference",
                "can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
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


def read_cohort(ctx: FieldContext, name: str, spec: Mapping[str, Any]) -> Cohort:
    ctx.warn_unknown(spec, {"parentName", "parent", "resourceGroups", "fairSharing"}, "spec")
    parent = spec.get("parentName") or spec.get("parent") or None
    if parent is not None:
        parent = ctx.name_str(parent, "spec.parentName")
        if parent == name:
            raise ctx.fail("spec.parentName", "a Cohort cannot be its own parent")
    groups = _resource_groups(ctx, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=parent is not None)
    return Cohort(name=name, parent=parent, resource_groups=groups, fair_weight=_fair_weight(ctx, spec))


def read_local_queue(ctx: FieldContext, name: str, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> LocalQueue:
    ctx.warn_unknown(spec, {"clusterQueue", "stopPolicy", "fairSharing"}, "spec")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ctx.fail("metadata.namespace", "must be a string")
    return LocalQueue(
        namespace=namespace, name=name, cluster_queue=ctx.name_str(spec.get("clusterQueue"), "spec.clusterQueue")
    )
