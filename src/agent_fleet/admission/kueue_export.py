"""The engine's admission objects as Kueue v1beta2 YAML (``agent-fleet queues export``).

Each object is written as Kueue's API (``kueue.x-k8s.io/v1beta2``) defines it: a ClusterQueue's
``cohortName``, ``resourceGroups`` (every flavor listing the covered resources in order),
``namespaceSelector``, ``preemption``, ``flavorFungibility``, ``stopPolicy`` and ``fairSharing``; a
Cohort's ``parentName``; a LocalQueue in its namespace; a WorkloadPriorityClass's ``value`` at its
top level. A field is written when it differs from Kueue's default (``queueingStrategy:
BestEffortFIFO``, every preemption policy ``Never``, ``whenCanBorrow: MayStopSearch``,
``whenCanPreempt: TryNextFlavor``, ``stopPolicy: None``, weight 1), so the output reads like what a
person writes. Quantities are integers where whole and strings in Kubernetes' quantity syntax
otherwise (``500m``, ``512Mi``): Kueue's quota fields take an integer or a string, never a float.

Two engine readings are written out explicitly because Kueue's differ: a ClusterQueue the engine
admits every namespace to gets ``namespaceSelector: {}`` (Kueue reads a missing selector as
"none"), and one that admits none gets ``namespaceSelector: null`` (the API server drops the null:
Kueue's "none"). Namespaces the configuration declares (their labels decide namespace selectors)
are written as ``v1`` Namespaces; a Kueue manager ``Configuration`` among the objects (fair
sharing, its feature gates) as ``config.kueue.x-k8s.io/v1beta2``, which is the manager's
configuration file rather than an object to apply.

What Kueue's API server would refuse is refused here, as a :class:`ConfigError` naming the object
and field: names that are not DNS-1123 subdomains (namespaces: labels), resource names that are not
qualified names, priorities outside int32, more resource groups, flavors or resources than Kueue
allows. Only what admission reads is kept by the loader, so ResourceFlavor node labels, taints and
tolerations and a ClusterQueue's admission checks are not written.

Round trip: ``load_kueue_yaml(dump_yaml(export_objects(objects)))`` equals ``objects`` (warnings
aside), so the same workloads get the same admission decisions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import yaml

from agent_fleet.admission.objects import (
    BEST_EFFORT_FIFO,
    ClusterQueue,
    Cohort,
    FairSharing,
    KueueObjects,
    LabelSelector,
    LocalQueue,
    Namespace,
    ResourceGroup,
    ResourceQuota,
)
from agent_fleet.admission.quantity import parse_quantity
from agent_fleet.errors import ConfigError

__all__ = ["API_VERSION", "CONFIG_API_VERSION", "dump_yaml", "export_objects", "kube_quantity", "per_session_quota"]

API_VERSION = "kueue.x-k8s.io/v1beta2"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"

# Kueue's name patterns (apis/kueue/v1beta2: ClusterQueueReference, CohortReference,
# ResourceFlavorReference, LocalQueueName) and Kubernetes' own for namespaces and resource names.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_INT32 = (-(2**31), 2**31 - 1)
# Kueue's list limits: resource groups per queue, flavors per group and per queue, resources.
_MAX_GROUPS, _MAX_FLAVORS, _MAX_ALL_FLAVORS, _MAX_RESOURCES = 16, 64, 256, 64
# Feature gates the admission controller follows, Kueue's default (on), and the FairSharing field.
_GATES = {
    "FairSharingPreemptWithinNominal": "preempt_within_nominal",
    "FairSharingPrioritizeNonBorrowing": "prioritize_non_borrowing",
}
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20))


def kube_quantity(resource: str, count: int) -> int | str:
    """An admission count (cpu in millicores, anything else in units) as a Kubernetes quantity:
    ``500m``, ``2``, ``512Mi`` (an exact binary multiple of Mi and above), else the integer."""
    if resource == "cpu":
        if count % 1000:
            return f"{count}m"
        return count // 1000
    for suffix, unit in _BINARY:
        if count and count % unit == 0:
            return f"{count // unit}{suffix}"
    return count


def per_session_quota(resource: str, per_session: object, sessions: int) -> int | str:
    """``sessions`` times one session's request of ``resource`` (a quantity), as a quantity."""
    return kube_quantity(resource, parse_quantity(resource, per_session) * sessions)


def _decimal(value: float) -> int | str:
    """A fair-sharing weight: an integer, or the shortest decimal string that reads back equal."""
    if value.is_integer():
        return int(value)
    return format(Decimal(repr(value)).normalize(), "f")


def _name(kind: str, name: str, value: str, path: str, *, label: bool = False) -> str:
    limit, pattern = (63, _LABEL) if label else (253, _SUBDOMAIN)
    if len(value) > limit or not pattern.match(value):
        what = "DNS-1123 label" if label else "DNS-1123 subdomain"
        raise ConfigError(
            f"{kind} {name!r}: {path}: {value!r} is not a {what} (lowercase a-z, 0-9, '-'"
            + ("" if label else ", '.'")
            + f"; at most {limit} characters); Kueue would refuse it"
        )
    return value


def _resource_name(kind: str, name: str, value: str, path: str) -> str:
    prefix, _, base = value.rpartition("/")
    bad_prefix = bool(prefix) and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix))
    if bad_prefix or len(base) > 63 or not _QUALIFIED.match(base):
        raise ConfigError(f"{kind} {name!r}: {path}: {value!r} is not a Kubernetes resource name; Kueue refuses it")
    return value


def _int32(kind: str, name: str, value: int, path: str) -> int:
    if not _INT32[0] <= value <= _INT32[1]:
        raise ConfigError(f"{kind} {name!r}: {path}: {value} is outside int32; Kueue would refuse it")
    return value


def _quota(kind: str, name: str, q: ResourceQuota, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": _resource_name(kind, name, q.name, f"{path}.name"),
        "nominalQuota": kube_quantity(q.name, q.nominal),
    }
    if q.borrowing_limit is not None:
        out["borrowingLimit"] = kube_quantity(q.name, q.borrowing_limit)
    if q.lending_limit is not None:
        out["lendingLimit"] = kube_quantity(q.name, q.lending_limit)
    return out


def _groups(kind: str, name: str, groups: Sequence[ResourceGroup]) -> list[dict[str, Any]]:
    if len(groups) > _MAX_GROUPS:
        raise ConfigError(f"{kind} {name!r}: spec.resourceGroups: more than {_MAX_GROUPS}; Kueue would refuse it")
    if sum(len(g.flavors) for g in groups) > _MAX_ALL_FLAVORS:
        raise ConfigError(f"{kind} {name!r}: spec.resourceGroups: more than {_MAX_ALL_FLAVORS} flavors in all")
    out = []
    for gi, group in enumerate(groups):
        path = f"spec.resourceGroups[{gi}]"
        if len(group.flavors) > _MAX_FLAVORS or len(group.covered_resources) > _MAX_RESOURCES:
            raise ConfigError(
                f"{kind} {name!r}: {path}: more than {_MAX_FLAVORS} flavors or resources; Kueue would refuse it"
            )
        flavors = [
            {
                "name": _name(kind, name, fq.name, f"{path}.flavors[{fi}].name"),
                "resources": [
                    _quota(kind, name, q, f"{path}.flavors[{fi}].resources[{qi}]") for qi, q in enumerate(fq.resources)
                ],
            }
            for fi, fq in enumerate(group.flavors)
        ]
        out.append({"coveredResources": list(group.covered_resources), "flavors": flavors})
    return out


def _selector(selector: LabelSelector | None) -> dict[str, Any] | None:
    if selector is None:
        return None
    out: dict[str, Any] = {}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        exprs = []
        for key, op, values in selector.match_expressions:
            expr: dict[str, Any] = {"key": key, "operator": op}
            if values:
                expr["values"] = list(values)
            exprs.append(expr)
        out["matchExpressions"] = exprs
    return out


def _differing(fields: Sequence[tuple[str, Any, Any]]) -> dict[str, Any]:
    """The ``(field, value, Kueue's default)`` whose value is not the default, by field."""
    return {name: value for name, value, default in fields if value != default}


def _cluster_queue(cq: ClusterQueue) -> dict[str, Any]:
    kind = "ClusterQueue"
    spec: dict[str, Any] = {}
    if cq.cohort is not None:
        spec["cohortName"] = _name(kind, cq.name, cq.cohort, "spec.cohortName")
    spec["namespaceSelector"] = _selector(cq.namespace_selector)
    spec |= _differing([("queueingStrategy", cq.queueing_strategy, BEST_EFFORT_FIFO)])
    if cq.resource_groups:
        spec["resourceGroups"] = _groups(kind, cq.name, cq.resource_groups)
    pre, fung = cq.preemption, cq.flavor_fungibility
    threshold = pre.max_priority_threshold
    if threshold is not None:
        _int32(kind, cq.name, threshold, "spec.preemption.borrowWithinCohort.maxPriorityThreshold")
    borrow = _differing([("policy", pre.borrow_within_cohort, "Never"), ("maxPriorityThreshold", threshold, None)])
    preemption = _differing(
        [
            ("withinClusterQueue", pre.within_cluster_queue, "Never"),
            ("reclaimWithinCohort", pre.reclaim_within_cohort, "Never"),
            ("borrowWithinCohort", borrow, {}),
        ]
    )
    fungibility = _differing(
        [
            ("whenCanBorrow", fung.when_can_borrow, "MayStopSearch"),
            ("whenCanPreempt", fung.when_can_preempt, "TryNextFlavor"),
            ("preference", fung.preference, None),
        ]
    )
    spec |= _differing(
        [
            ("preemption", preemption, {}),
            ("flavorFungibility", fungibility, {}),
            ("stopPolicy", cq.stop_policy, "None"),
            ("fairSharing", {"weight": _decimal(cq.fair_weight)}, {"weight": 1}),
        ]
    )
    return _object(kind, cq.name, spec=spec)


def _cohort(cohort: Cohort) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if cohort.parent is not None:
        spec["parentName"] = _name("Cohort", cohort.name, cohort.parent, "spec.parentName")
    if cohort.resource_groups:
        spec["resourceGroups"] = _groups("Cohort", cohort.name, cohort.resource_groups)
    spec |= _differing([("fairSharing", {"weight": _decimal(cohort.fair_weight)}, {"weight": 1})])
    return _object("Cohort", cohort.name, spec=spec)


def _local_queue(lq: LocalQueue) -> dict[str, Any]:
    kind = "LocalQueue"
    _name(kind, lq.key, lq.namespace, "metadata.namespace", label=True)
    spec = {"clusterQueue": _name(kind, lq.key, lq.cluster_queue, "spec.clusterQueue")}
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": _name(kind, lq.key, lq.name, "metadata.name"), "namespace": lq.namespace},
        "spec": spec,
    }


def _namespace(ns: Namespace) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": _name("Namespace", ns.name, ns.name, "metadata.name", label=True)}
    if ns.labels:
        meta["labels"] = dict(ns.labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _configuration(fs: FairSharing) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": CONFIG_API_VERSION, "kind": "Configuration"}
    if fs.enable:  # in v1beta2 the field's presence turns fair sharing on
        out["fairSharing"] = {"preemptionStrategies": list(fs.preemption_strategies)}
    gates = {gate: False for gate, attr in _GATES.items() if not getattr(fs, attr)}
    if gates:
        out["featureGates"] = gates
    return out


def _object(kind: str, name: str, *, spec: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind, "metadata": {}}
    out["metadata"]["name"] = _name(kind, name, name, "metadata.name")
    if spec is not None:
        out["spec"] = spec
    return out


def export_objects(objects: KueueObjects) -> list[dict[str, Any]]:
    """Every object the engine admits by, in the order ``kubectl apply`` needs them: Namespaces,
    ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, WorkloadPriorityClasses; last the manager
    Configuration when the objects carry one. Raises ConfigError for what Kueue would refuse."""
    docs: list[dict[str, Any]] = [_namespace(objects.namespaces[n]) for n in sorted(objects.namespaces)]
    # Every ResourceFlavor field is optional and admission reads none: a flavor is its name.
    docs += [_object("ResourceFlavor", name, spec=None) for name in sorted(objects.flavors)]
    docs += [_cohort(objects.cohorts[n]) for n in sorted(objects.cohorts)]
    docs += [_cluster_queue(objects.cluster_queues[n]) for n in sorted(objects.cluster_queues)]
    docs += [_local_queue(objects.local_queues[k]) for k in sorted(objects.local_queues)]
    for name in sorted(objects.priority_classes):
        pc = objects.priority_classes[name]
        value = _int32("WorkloadPriorityClass", name, pc.value, "value")
        meta = {"name": _name("WorkloadPriorityClass", name, name, "metadata.name")}
        docs.append({"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": meta, "value": value})
    if objects.fair_sharing is not None:
        docs.append(_configuration(objects.fair_sharing))
    return docs


class _Dumper(yaml.SafeDumper):
    """Safe YAML with no anchors (``kubectl`` and people read every value in place) and multi-line
    strings as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # PyYAML falls back to a quoted style where a block cannot hold the text exactly.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def dump_yaml(docs: Sequence[dict[str, Any]], *, header: str = "") -> str:
    """A multi-document YAML stream (``---`` before each document), keys in the order written."""
    lead = "".join(f"# {line}\n" for line in header.splitlines())
    body = yaml.dump_all(list(docs), Dumper=_Dumper, sort_keys=False, default_flow_style=False, explicit_start=True)
    return lead + body
