"""Reading Kueue YAML as users write it: versions, defaults, refusals naming object and field,
and hostile input."""

from __future__ import annotations

import pytest

from agent_fleet.admission import AdmissionController, default_objects, load_kueue_yaml
from agent_fleet.admission.quantity import format_quantity, parse_quantity
from agent_fleet.clock import VirtualClock
from agent_fleet.errors import ConfigError

GOOD = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: agents            # v1beta2 spelling
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  resourceGroups:
  - coveredResources: [cpu, memory, example.com/tokens-per-min]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "2"}
      - {name: memory, nominalQuota: 1Gi, lendingLimit: 512Mi}
      - {name: example.com/tokens-per-min, nominalQuota: 1e6}
  colour: blue
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ns1}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: agent-prod}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: agents}
spec: {parentName: org}
"""


def test_reads_every_kind_with_kueue_spellings() -> None:
    objs = load_kueue_yaml(GOOD)
    cq = objs.cluster_queues["team-a"]
    assert cq.cohort == "agents"
    assert cq.queueing_strategy == "StrictFIFO"
    assert cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority"
    assert cq.preemption.max_priority_threshold == 100
    cpu = cq.quota_of("default", "cpu")
    mem = cq.quota_of("default", "memory")
    tokens = cq.quota_of("default", "example.com/tokens-per-min")
    assert cpu is not None and (cpu.nominal, cpu.borrowing_limit) == (500, 2000)
    assert mem is not None and (mem.nominal, mem.lending_limit) == (2**30, 2**29)
    assert tokens is not None and tokens.nominal == 1_000_000
    assert objs.resolve_local_queue("ns1/lq") is not None
    assert objs.resolve_local_queue("lq") is None  # bare name means namespace default
    assert objs.priority_classes["agent-prod"].value == 1000
    assert objs.cohorts["agents"].parent == "org"
    assert any("unknown field spec.colour" in w for w in objs.warnings)


def test_cohort_name_spellings_must_agree() -> None:
    text = GOOD.replace("cohort: agents ", "cohort: agents\n  cohortName: other ")
    with pytest.raises(ConfigError, match=r"ClusterQueue 'team-a': spec.cohortName"):
        load_kueue_yaml(text)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (("nominalQuota: 500m", "nominalQuota: -1"), "resources[0].nominalQuota"),
        (("nominalQuota: 500m", "nominalQuota: lots"), "resources[0].nominalQuota"),
        (("lendingLimit: 512Mi", "lendingLimit: 2Gi"), "resources[1].lendingLimit"),
        (("queueingStrategy: StrictFIFO", "queueingStrategy: Random"), "spec.queueingStrategy"),
        (("reclaimWithinCohort: Any", "reclaimWithinCohort: Never"), "borrowWithinCohort.policy"),
        (("- {name: memory,", "- {name: mem,"), "flavors[0].resources"),
        (("spec: {clusterQueue: team-a}", "spec: {}"), "spec.clusterQueue"),
        (("value: 1000", "value: high"), "value"),
    ],
)
def test_invalid_objects_are_refused_naming_object_and_field(patch: tuple[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_kueue_yaml(GOOD.replace(*patch))
    assert field in str(info.value)
    assert "'" in str(info.value)  # the object's name is quoted in the message


def test_borrowing_limit_without_cohort_is_refused() -> None:
    text = GOOD.replace("cohort: agents            # v1beta2 spelling", "")
    with pytest.raises(ConfigError, match="borrowingLimit: must be unset without a cohort"):
        load_kueue_yaml(text)


def test_cohort_cycle_is_refused() -> None:
    text = (
        GOOD
        + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\nspec: {parentName: agents}\n"
    )
    with pytest.raises(ConfigError, match="cycle"):
        load_kueue_yaml(text)


def test_alias_bomb_fails_fast_with_a_clear_error() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    with pytest.raises(ConfigError, match="too large"):
        load_kueue_yaml("\n".join(lines))


def test_loaded_objects_sharing_nodes_are_bounded_too() -> None:
    shared = {"spec": {"resourceGroups": [list(range(1000))] * 1000}}  # 1,000,000 nodes, shared
    with pytest.raises(ConfigError, match="Kueue objects: YAML too large: more than 500000 nodes"):
        load_kueue_yaml([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", **shared}])


@pytest.mark.parametrize(
    "text",
    ["!!python/object/apply:os.system ['true']", "kind: [unclosed", "[" * 5000 + "]" * 5000],
)
def test_hostile_yaml_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        load_kueue_yaml(text)


def test_unknown_kind_warns_and_list_kind_is_flattened() -> None:
    objs = load_kueue_yaml(
        "kind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n"
        "- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}}\n"
    )
    assert list(objs.flavors) == ["f"]
    assert any("ConfigMap" in w for w in objs.warnings)


def test_default_objects_is_one_queue_capped_by_concurrency() -> None:
    objs = default_objects(7)
    (cq,) = objs.cluster_queues.values()
    quota = cq.quota_of("default", "pods")
    assert quota is not None and quota.nominal == 7
    assert objs.resolve_local_queue("default") is not None
    with pytest.raises(ConfigError):
        default_objects(0)


@pytest.mark.parametrize(
    ("resource", "value", "count"),
    [
        ("cpu", "500m", 500),
        ("cpu", 2, 2000),
        ("cpu", 0.25, 250),
        ("memory", "1Ki", 1024),
        ("memory", "1.5k", 1500),
        ("pods", "3", 3),
        ("memory", "100m", 1),
    ],
)
def test_quantities_are_counted_as_kueue_does(resource: str, value: object, count: int) -> None:
    assert parse_quantity(resource, value) == count


def test_quantity_format_round_trip() -> None:
    assert format_quantity("cpu", 1500) == "1500m"
    assert format_quantity("cpu", 2000) == "2"
    assert format_quantity("pods", 4) == "4"


def test_kueue_configuration_enables_fair_sharing_and_weights_are_read() -> None:
    text = (
        GOOD.replace("  colour: blue\n", "  colour: blue\n  fairSharing: {weight: 500m}\n")
        + "---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
        + "fairSharing: {enable: true, preemptionStrategies: [LessThanInitialShare]}\n"
        + "manageJobsWithoutQueueName: true\n"
    )
    objects = load_kueue_yaml(text)
    assert objects.cluster_queues["team-a"].fair_weight == 0.5
    assert objects.cohorts["agents"].fair_weight == 1.0
    assert objects.fair_sharing is not None and objects.fair_sharing.enable
    assert objects.fair_sharing.preemption_strategies == ("LessThanInitialShare",)
    assert any("manageJobsWithoutQueueName" in w for w in objects.warnings)
    # A controller built from these objects (as the engine builds one from fleet.yaml) uses it.
    ctl = AdmissionController(objects, VirtualClock())
    assert ctl.scheduler.fair_sharing == objects.fair_sharing
    # Without the Configuration, fair sharing stays off.
    assert AdmissionController(load_kueue_yaml(GOOD), VirtualClock()).scheduler.fair_sharing is None


def test_two_kueue_configurations_are_refused() -> None:
    config = "---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing: {enable: true}\n"
    with pytest.raises(ConfigError, match="only one is allowed"):
        load_kueue_yaml(GOOD + config + config)
