"""Kueue's v1beta2 API rules, written down from its API types (``apis/kueue/v1beta2``) and docs, to
check exported objects without a cluster.

No package registry ships Kueue's CRDs (its ``openAPIV3Schema``), so the published schema itself
cannot be used here. What follows restates, as JSON Schema, what those types declare: the fields of
each spec (no others), required fields, enums, defaults that matter, name patterns, int32 ranges,
list limits and the quantity type (an integer, or a string in Kubernetes' quantity syntax:
``x-kubernetes-int-or-string`` with the quantity pattern). The CEL rules of the types and the
documented webhook rules are :func:`semantic_errors`. Like the API server, :func:`check` drops
null fields before validating (a field without ``nullable`` is pruned, not refused).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

import jsonschema

from agent_fleet.admission.quantity import parse_decimal

__all__ = ["API", "SCHEMAS", "check", "prune_nulls", "semantic_errors"]

API = "kueue.x-k8s.io/v1beta2"
SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}


def _obj(props: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(props), "required": list(required), "additionalProperties": False}


def _enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


NAME = {"type": "string", "maxLength": 253, "pattern": SUBDOMAIN}
QTY = {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
SELECTOR = _obj(
    {
        "matchLabels": STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": _obj(
                {
                    "key": {"type": "string"},
                    "operator": _enum("In", "NotIn", "Exists", "DoesNotExist"),
                    "values": {"type": "array", "items": {"type": "string"}},
                },
                ("key", "operator"),
            ),
        },
    }
)
QUOTA = _obj(
    {"name": {"type": "string"}, "nominalQuota": QTY, "borrowingLimit": QTY, "lendingLimit": QTY},
    ("name", "nominalQuota"),
)
FLAVOR_QUOTAS = _obj(
    {"name": NAME, "resources": {"type": "array", "minItems": 1, "maxItems": 64, "items": QUOTA}},
    ("name", "resources"),
)
RESOURCE_GROUP = _obj(
    {
        "coveredResources": {"type": "array", "minItems": 1, "maxItems": 64, "items": {"type": "string"}},
        "flavors": {"type": "array", "minItems": 1, "maxItems": 64, "items": FLAVOR_QUOTAS},
    },
    ("coveredResources", "flavors"),
)
GROUPS = {"type": "array", "maxItems": 16, "items": RESOURCE_GROUP}
FAIR_SHARING = _obj({"weight": QTY})
META = {"type": "object", "properties": {"name": NAME, "namespace": {"type": "string"}}, "required": ["name"]}

CLUSTER_QUEUE_SPEC = _obj(
    {
        "resourceGroups": GROUPS,
        "cohortName": NAME,
        "queueingStrategy": _enum("StrictFIFO", "BestEffortFIFO"),
        "namespaceSelector": SELECTOR,
        "flavorFungibility": _obj(
            {
                "whenCanBorrow": _enum("MayStopSearch", "TryNextFlavor"),
                "whenCanPreempt": _enum("MayStopSearch", "TryNextFlavor"),
                "preference": _enum("BorrowingOverPreemption", "PreemptionOverBorrowing"),
            }
        ),
        "preemption": _obj(
            {
                "reclaimWithinCohort": _enum("Never", "LowerPriority", "Any"),
                "withinClusterQueue": _enum("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
                "borrowWithinCohort": _obj({"policy": _enum("Never", "LowerPriority"), "maxPriorityThreshold": INT32}),
            }
        ),
        "admissionChecksStrategy": {"type": "object"},
        "stopPolicy": _enum("None", "Hold", "HoldAndDrain"),
        "fairSharing": FAIR_SHARING,
        "admissionScope": _obj(
            {"admissionMode": _enum("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")}, ("admissionMode",)
        ),
        "concurrentAdmissionPolicy": {"type": "object"},
    }
)
COHORT_SPEC = _obj({"parentName": NAME, "resourceGroups": GROUPS, "fairSharing": FAIR_SHARING})
LOCAL_QUEUE_SPEC = _obj(
    {
        "clusterQueue": NAME,
        "stopPolicy": _enum("None", "Hold", "HoldAndDrain"),
        "fairSharing": FAIR_SHARING,
        "wallTimePolicy": {"type": "object"},
    }
)
FLAVOR_SPEC = _obj(
    {
        "nodeLabels": {**STRING_MAP, "maxProperties": 8},
        "nodeTaints": {"type": "array", "maxItems": 8},
        "tolerations": {"type": "array", "maxItems": 8},
        "topologyName": NAME,
        "resourceWeights": {"type": "object", "maxProperties": 16, "additionalProperties": QTY},
    }
)


def _root(kind: str, spec: dict[str, Any] | None, *, namespaced: bool = False, extra: Any = None) -> dict[str, Any]:
    props: dict[str, Any] = {
        "apiVersion": {"const": API},
        "kind": {"const": kind},
        "metadata": {**META, "required": ["name", "namespace"]} if namespaced else META,
    }
    if spec is not None:
        props["spec"] = spec
    props.update(extra or {})
    return _obj(props, ("apiVersion", "kind", "metadata"))


SCHEMAS: dict[str, dict[str, Any]] = {
    "ResourceFlavor": _root("ResourceFlavor", FLAVOR_SPEC),
    "Cohort": _root("Cohort", COHORT_SPEC),
    "ClusterQueue": _root("ClusterQueue", CLUSTER_QUEUE_SPEC),
    "LocalQueue": _root("LocalQueue", LOCAL_QUEUE_SPEC, namespaced=True),
    "WorkloadPriorityClass": {
        **_root(
            "WorkloadPriorityClass", None, extra={"value": INT32, "description": {"type": "string", "maxLength": 2048}}
        ),
        "required": ["apiVersion", "kind", "metadata", "value"],
    },
}


def prune_nulls(value: Any) -> Any:
    """What the API server keeps of an object: fields set to null are dropped."""
    if isinstance(value, Mapping):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_nulls(v) for v in value]
    return value


def _groups_errors(where: str, spec: Mapping[str, Any], *, has_parent: bool) -> Iterator[str]:
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for gi, group in enumerate(spec.get("resourceGroups", [])):
        covered = group["coveredResources"]
        for resource in covered:
            if resource in seen_resources:
                yield f"{where}: resource {resource} is in more than one resource group"
            seen_resources.add(resource)
        for flavor in group["flavors"]:
            if flavor["name"] in seen_flavors:
                yield f"{where}: flavor {flavor['name']} is in more than one resource group"
            seen_flavors.add(flavor["name"])
            if [r["name"] for r in flavor["resources"]] != covered:  # CEL: same number; webhook: same order
                yield f"{where}: group {gi} flavor {flavor['name']}: resources must be the coveredResources in order"
            for quota in flavor["resources"]:
                values = {
                    k: parse_decimal(quota[k]) for k in ("nominalQuota", "borrowingLimit", "lendingLimit") if k in quota
                }
                if any(v < 0 for v in values.values()):
                    yield f"{where}: quotas must be non-negative"
                if not has_parent and ("borrowingLimit" in values or "lendingLimit" in values):
                    yield f"{where}: borrowingLimit and lendingLimit must be nil without a cohort (parent)"
                if "lendingLimit" in values and values["lendingLimit"] > values.get("nominalQuota", Decimal(0)):
                    yield f"{where}: lendingLimit must be less than or equal to nominalQuota"


def _weight_errors(where: str, spec: Mapping[str, Any]) -> Iterator[str]:
    weight = spec.get("fairSharing", {}).get("weight")
    if weight is not None and 0 < parse_decimal(weight) <= Decimal("1e-9"):
        yield f"{where}: fairSharing.weight must be 0 or above 10^-9"


def semantic_errors(doc: Mapping[str, Any]) -> list[str]:
    """The CEL rules of Kueue's v1beta2 types and the rules its webhook documents."""
    kind, spec = doc["kind"], doc.get("spec", {})
    where = f"{kind} {doc['metadata']['name']}"
    errors: list[str] = []
    if kind == "ClusterQueue":
        errors += _groups_errors(where, spec, has_parent="cohortName" in spec)
        errors += _weight_errors(where, spec)
        fung = spec.get("flavorFungibility", {})
        both_next = (fung.get("whenCanBorrow", "MayStopSearch"), fung.get("whenCanPreempt", "TryNextFlavor")) == (
            "TryNextFlavor",
            "TryNextFlavor",
        )
        if "preference" in fung and not both_next:
            errors.append(f"{where}: preference needs whenCanBorrow and whenCanPreempt TryNextFlavor")
        pre = spec.get("preemption", {})
        borrow = pre.get("borrowWithinCohort", {}).get("policy", "Never")
        if pre.get("reclaimWithinCohort", "Never") == "Never" and borrow != "Never":
            errors.append(f"{where}: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    elif kind == "Cohort":
        errors += _groups_errors(where, spec, has_parent="parentName" in spec)
        errors += _weight_errors(where, spec)
        if spec.get("parentName") == doc["metadata"]["name"]:
            errors.append(f"{where}: a Cohort cannot be its own parent")
    elif kind == "LocalQueue" and "clusterQueue" not in spec:
        errors.append(f"{where}: spec.clusterQueue is required to admit anything")
    return errors


def check(doc: Mapping[str, Any]) -> list[str]:
    """Every violation of Kueue's v1beta2 rules in ``doc`` (empty: Kueue accepts it)."""
    kept = prune_nulls(doc)
    schema = SCHEMAS.get(kept.get("kind", ""))
    if schema is None:
        return [f"not a Kueue v1beta2 kind: {kept.get('kind')!r}"]
    found = [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in _validator(schema).iter_errors(kept)
    ]
    return found or semantic_errors(kept)


def _validator(schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)
