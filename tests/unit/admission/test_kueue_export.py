"""The Kueue v1beta2 writer (``agent-fleet queues export``): every field as Kueue defines it, what
Kueue would refuse refused, and every exported object within Kueue's rules."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
import yaml
from admission_builders import cohort, cq, flavor, group, lq
from kueue_v1beta2_rules import API, check

from agent_fleet.admission import default_objects, load_kueue_yaml, parse_objects
from agent_fleet.admission.kueue_export import dump_yaml, export_objects, kube_quantity
from agent_fleet.admission.objects import KueueObjects
from agent_fleet.errors import ConfigError

CONFIG_API = "config.kueue.x-k8s.io/v1beta2"


def kitchen_sink() -> list[dict[str, Any]]:
    """Every field the loader reads, with values other than Kueue's defaults."""
    fung = {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
        "preference": "PreemptionOverBorrowing",
    }
    full = {
        "withinClusterQueue": "LowerOrNewerEqualPriority",
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3},
    }
    selector = {
        "matchLabels": {"team": "research"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
            {"key": "frozen", "operator": "DoesNotExist"},
        ],
    }
    gpu = group({"a100": {"nvidia.com/gpu": (4, 2, 1)}, "spot": {"nvidia.com/gpu": (8, None, None)}})
    cpu = group({"default": {"cpu": ("1500m", "500m", "1"), "memory": ("64Gi", None, "32Gi"), "pods": (20, 5, None)}})
    team_a = cq("team-a", {}, cohort="research", groups=[cpu, gpu], preemption=full, selector=selector, weight="0.5")
    team_a["spec"]["flavorFungibility"] = fung
    team_a["spec"]["queueingStrategy"] = "StrictFIFO"
    team_a["spec"]["stopPolicy"] = "Hold"
    team_b = cq("team-b", {"cpu": 4}, cohort="research", preemption={"reclaimWithinCohort": "Any"})
    team_b["spec"]["flavorFungibility"] = {"whenCanPreempt": "MayStopSearch"}
    closed = cq("closed", {"pods": 1}, weight=0)
    closed["spec"]["namespaceSelector"] = None
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "research"}}},
        flavor(),
        flavor("a100"),
        flavor("spot"),
        cohort("root", {"cpu": 10}, weight=3),
        cohort("research", {"cpu": (2, 4, 1)}, parent="root", weight="1.25"),
        team_a,
        team_b,
        closed,
        lq("train", "team-a", namespace="ml"),
        lq("default", "team-b"),
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "agent-prod"}, "value": 2**31 - 1},
        {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "batch"}, "value": -(2**31)},
        {
            "apiVersion": CONFIG_API,
            "kind": "Configuration",
            "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
            "featureGates": {"FairSharingPrioritizeNonBorrowing": False},
        },
    ]


def without_warnings(objects: KueueObjects) -> KueueObjects:
    return replace(objects, warnings=())


def exported(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(dump_yaml(export_objects(load_kueue_yaml(items)))))


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_every_field_survives_export_and_load() -> None:
    objects = load_kueue_yaml(kitchen_sink())
    again = load_kueue_yaml(dump_yaml(export_objects(objects)))
    assert without_warnings(again) == without_warnings(objects)
    assert objects.fair_sharing is not None and objects.fair_sharing.enable  # the v1beta2 block turned it on
    assert again.warnings == ()


def test_every_exported_object_is_within_kueues_v1beta2_rules() -> None:
    docs = exported(kitchen_sink())
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "Namespace",
        *["ResourceFlavor"] * 3,
        *["Cohort"] * 2,
        *["ClusterQueue"] * 3,
        *["LocalQueue"] * 2,
        *["WorkloadPriorityClass"] * 2,
        "Configuration",
    ]
    for doc in docs:
        if doc["apiVersion"] == API:
            assert check(doc) == [], doc


def test_cluster_queue_fields_are_spelled_as_kueue_defines_them() -> None:
    cqs = by_kind(exported(kitchen_sink()), "ClusterQueue")
    spec = cqs["team-a"]["spec"]
    assert spec["cohortName"] == "research" and "cohort" not in spec
    assert spec["queueingStrategy"] == "StrictFIFO" and spec["stopPolicy"] == "Hold"
    assert spec["fairSharing"] == {"weight": "0.5"}  # a string: Kueue's weight is a quantity, never a float
    assert spec["preemption"] == {
        "withinClusterQueue": "LowerOrNewerEqualPriority",
        "reclaimWithinCohort": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3},
    }
    assert spec["namespaceSelector"]["matchExpressions"][1] == {"key": "frozen", "operator": "DoesNotExist"}
    cpu_group, gpu_group = spec["resourceGroups"]
    assert cpu_group["coveredResources"] == ["cpu", "memory", "pods"]
    assert cpu_group["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "1500m", "borrowingLimit": "500m", "lendingLimit": 1},
        {"name": "memory", "nominalQuota": "64Gi", "lendingLimit": "32Gi"},
        {"name": "pods", "nominalQuota": 20, "borrowingLimit": 5},
    ]
    assert [f["name"] for f in gpu_group["flavors"]] == ["a100", "spot"]
    # Kueue's defaults are left out; the engine's two readings Kueue does not share are written out.
    assert cqs["team-b"]["spec"] == {
        "cohortName": "research",
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
            }
        ],
        "preemption": {"reclaimWithinCohort": "Any"},
        "flavorFungibility": {"whenCanPreempt": "MayStopSearch"},
    }
    assert cqs["closed"]["spec"]["namespaceSelector"] is None  # null: Kueue's "no namespace"
    assert cqs["closed"]["spec"]["fairSharing"] == {"weight": 0}


def test_cohorts_local_queues_priority_classes_and_configuration() -> None:
    docs = exported(kitchen_sink())
    cohorts = by_kind(docs, "Cohort")
    assert cohorts["research"]["spec"]["parentName"] == "root"
    assert cohorts["research"]["spec"]["fairSharing"] == {"weight": "1.25"}
    assert cohorts["root"]["spec"] == {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 10}]}],
            }
        ],
        "fairSharing": {"weight": 3},
    }
    assert by_kind(docs, "LocalQueue")["train"] == {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"clusterQueue": "team-a"},
    }
    assert by_kind(docs, "WorkloadPriorityClass")["agent-prod"] == {
        "apiVersion": API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "agent-prod"},
        "value": 2**31 - 1,
    }
    assert by_kind(docs, "ResourceFlavor")["a100"] == {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": {"name": "a100"},
    }
    (config,) = [d for d in docs if d["kind"] == "Configuration"]
    assert config == {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
        "featureGates": {"FairSharingPrioritizeNonBorrowing": False},
    }


@pytest.mark.parametrize(
    ("resource", "count", "written"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 2000, 2),
        ("cpu", 0, 0),
        ("memory", 512 * 2**20, "512Mi"),
        ("memory", 3 * 2**30, "3Gi"),
        ("memory", 1000, 1000),
        ("pods", 7, 7),
        ("nvidia.com/gpu", 4, 4),
    ],
)
def test_quantities_are_integers_or_kubernetes_quantity_strings(resource: str, count: int, written: Any) -> None:
    assert kube_quantity(resource, count) == written


def test_the_default_queue_is_written_with_a_sandbox_worth_of_cpu_and_memory_per_session() -> None:
    plain = default_objects(50)
    sized = default_objects(50, per_session={"cpu": "1500m", "memory": "512Mi"})
    docs = list(yaml.safe_load_all(dump_yaml(export_objects(sized))))
    (queue,) = by_kind(docs, "ClusterQueue").values()
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "pods", "nominalQuota": 50},
        {"name": "cpu", "nominalQuota": 75},
        {"name": "memory", "nominalQuota": "25Gi"},
    ]
    assert all(check(d) == [] for d in docs)
    assert without_warnings(load_kueue_yaml(dump_yaml(docs))) == without_warnings(sized)
    # The engine's own default (pods only) is unchanged.
    assert plain.cluster_queues["default"].resource_groups[0].covered_resources == ("pods",)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o[1]["metadata"].update(name="Team_A"), r"ClusterQueue 'Team_A': metadata.name: 'Team_A' is not"),
        (lambda o: o[1]["spec"].update(cohortName="Research"), r"spec.cohortName: 'Research' is not a DNS-1123"),
        (lambda o: o[2]["metadata"].update(namespace="a.b"), r"LocalQueue 'a.b/q': metadata.namespace: 'a.b'"),
        (lambda o: o[3].update(value=2**31), r"WorkloadPriorityClass 'p': value: 2147483648 is outside int32"),
        (
            lambda o: (
                o[1]["spec"]["resourceGroups"][0].update(coveredResources=["gpu!"])
                or o[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(name="gpu!")
            ),
            r"'gpu!' is not a Kubernetes resource name",
        ),
    ],
)
def test_what_kueue_would_refuse_is_refused_naming_object_and_field(mutate: Any, message: str) -> None:
    items = [flavor(), cq("team-a", {"cpu": 1}), lq("q", "team-a"), _wpc("p", 1)]
    mutate(items)
    with pytest.raises(ConfigError, match=message):
        export_objects(parse_objects(items))


def test_more_resource_groups_than_kueue_allows_is_refused() -> None:
    groups = [group({f"f{i}": {f"r{i}": 1}}) for i in range(17)]
    objects = parse_objects([*(flavor(f"f{i}") for i in range(17)), cq("big", {}, groups=groups)])
    with pytest.raises(ConfigError, match="more than 16"):
        export_objects(objects)


def test_the_loader_refuses_a_preference_kueue_refuses() -> None:
    bad = cq("q", {"cpu": 1}, fungibility={"whenCanBorrow": "MayStopSearch", "preference": "BorrowingOverPreemption"})
    with pytest.raises(ConfigError, match="preference: can only be set when both"):
        parse_objects([bad])


def test_the_loader_refuses_a_weight_kueue_refuses() -> None:
    with pytest.raises(ConfigError, match=r"weight: must be 0 or above 10\^-9"):
        parse_objects([cq("q", {"cpu": 1}, weight="1e-10")])


def test_a_v1beta2_configuration_turns_fair_sharing_on_by_its_presence() -> None:
    v1beta2 = {"apiVersion": CONFIG_API, "kind": "Configuration", "fairSharing": {}}
    assert parse_objects([v1beta2]).fair_sharing is not None
    assert parse_objects([v1beta2]).fair_sharing.enable  # type: ignore[union-attr]
    v1beta1 = {**v1beta2, "apiVersion": "config.kueue.x-k8s.io/v1beta1"}
    assert not parse_objects([v1beta1]).fair_sharing.enable  # type: ignore[union-attr]
    with_enable = copy.deepcopy(v1beta2)
    with_enable["fairSharing"]["enable"] = False
    read = parse_objects([with_enable])
    assert read.fair_sharing.enable and "fairSharing.enable is not a v1beta2 field" in read.warnings[0]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("mutate", "found"),
    [
        (lambda s: s.update(cohort="x"), "Additional properties are not allowed ('cohort' was unexpected)"),
        (lambda s: s.update(queueingStrategy="FIFO"), "'FIFO' is not one of"),
        (lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuota=0.5), "nominalQuota"),
        (
            lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(nominalQuota="5 cores"),
            "does not match",
        ),
        (lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(borrowingLimit=1), "without a cohort"),
        (lambda s: s.update(flavorFungibility={"preference": "BorrowingOverPreemption"}), "preference needs"),
        (
            lambda s: s.update(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
            "reclaimWithinCohort=Never",
        ),
        (lambda s: s["resourceGroups"][0].update(coveredResources=["cpu", "pods"]), "coveredResources in order"),
    ],
)
def test_the_rules_find_what_kueue_refuses(mutate: Any, found: str) -> None:
    # The checker itself must fail on what Kueue's API server would refuse, or its passes mean nothing.
    (doc,) = [d for d in exported([flavor(), cq("q", {"cpu": 1})]) if d["kind"] == "ClusterQueue"]
    assert check(doc) == []
    mutate(doc["spec"])
    assert any(found in error for error in check(doc)), check(doc)


def _wpc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
