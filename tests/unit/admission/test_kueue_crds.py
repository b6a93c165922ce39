"""The export checked against Kueue's published v1beta2 CRDs (its own ``openAPIV3Schema`` and CEL
rules, see ``kueue_crds.py``): every object ``queues export`` writes — the kitchen sink, the default
queue, every scenario of the suite — is one the API server admits as written, and the checker finds
what the server refuses, so its passes mean something.

Skipped, with the reason printed, where the checkout has no CRDs beside it (a user's clone).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from admission_builders import cohort, cq, flavor, lq
from kueue_crds import CRD_DIR, crd_dir, crd_errors, kinds
from test_kueue_export import exported, kitchen_sink
from test_kueue_export_roundtrip import SCENARIOS

from agent_fleet.admission import default_objects
from agent_fleet.admission.kueue_export import dump_yaml, export_objects

API = "kueue.x-k8s.io/v1beta2"

pytestmark = pytest.mark.skipif(crd_dir() is None, reason=f"Kueue's published CRDs are not at {CRD_DIR}")


def kueue_docs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["apiVersion"] == API]


def test_the_published_crds_cover_every_kind_the_export_writes() -> None:
    written = {d["kind"] for d in kueue_docs(exported(kitchen_sink()))}
    assert written == {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"}
    assert written <= kinds()


def test_every_object_of_the_kitchen_sink_is_admitted_by_kueues_crds() -> None:
    docs = kueue_docs(exported(kitchen_sink()))
    assert len(docs) == 12
    assert {d["metadata"]["name"]: crd_errors(d) for d in docs} == {d["metadata"]["name"]: [] for d in docs}


@pytest.mark.parametrize("per_session", [None, {"cpu": "1500m", "memory": "512Mi"}])
def test_the_default_queue_is_admitted_by_kueues_crds(per_session: dict[str, str] | None) -> None:
    objects = default_objects(50, per_session=per_session) if per_session else default_objects(50)
    docs = list(yaml.safe_load_all(dump_yaml(export_objects(objects))))
    assert docs and all(crd_errors(d) == [] for d in docs)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_of_the_suite_exports_objects_kueues_crds_admit(name: str) -> None:
    docs = kueue_docs(exported(SCENARIOS[name]["objects"]))
    assert docs
    assert [(d["kind"], d["metadata"]["name"], crd_errors(d)) for d in docs] == [
        (d["kind"], d["metadata"]["name"], []) for d in docs
    ]


def _cluster_queue() -> dict[str, Any]:
    docs = exported([flavor(), cohort("c", {"cpu": 2}), cq("q", {"cpu": 1})])
    (doc,) = [d for d in docs if d["kind"] == "ClusterQueue"]
    assert crd_errors(doc) == []
    return doc


def _quota(spec: dict[str, Any]) -> dict[str, Any]:
    quota: dict[str, Any] = spec["resourceGroups"][0]["flavors"][0]["resources"][0]
    return quota


@pytest.mark.parametrize(
    ("mutate", "found"),
    [
        # the schema: an unknown field Kubernetes would silently prune, an enum, a quantity, a type
        (lambda s: s.update(cohort="x"), "Additional properties are not allowed ('cohort' was unexpected)"),
        (lambda s: s.update(queueingStrategy="FIFO"), "'FIFO' is not one of"),
        (lambda s: _quota(s).update(nominalQuota="5 cores"), "does not match"),
        (lambda s: _quota(s).update(nominalQuota=[1]), "nominalQuota"),
        (lambda s: s["resourceGroups"][0]["flavors"][0].update(name="Bad_Flavor"), "does not match"),
        # the CEL rules, as the API server evaluates them
        (
            lambda s: _quota(s).update(borrowingLimit=1),
            "borrowingLimit must be nil when cohort is empty",
        ),
        (
            lambda s: s.update(flavorFungibility={"preference": "BorrowingOverPreemption"}),
            "preference can only be set when both whenCanBorrow and",
        ),
        (
            lambda s: s.update(
                preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
            ),
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ),
        (
            lambda s: s["resourceGroups"][0].update(coveredResources=["cpu", "memory"]),
            "flavors must have the same number of resources as the",
        ),
    ],
)
def test_the_checker_finds_what_kueues_api_server_refuses(mutate: Any, found: str) -> None:
    doc = _cluster_queue()
    mutate(doc["spec"])
    assert any(found in error for error in crd_errors(doc)), crd_errors(doc)


def test_a_cohort_queue_may_borrow_and_nulls_are_pruned_as_the_server_prunes_them() -> None:
    doc = _cluster_queue()
    doc["spec"]["cohortName"] = "c"
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1
    doc["spec"]["stopPolicy"] = None  # not nullable, has a default: defaulted, not refused
    assert crd_errors(doc) == []


def test_other_kinds_are_checked_against_their_own_crd() -> None:
    (local,) = [d for d in exported([flavor(), cq("q", {"cpu": 1}), lq("l", "q")]) if d["kind"] == "LocalQueue"]
    assert crd_errors(local) == []
    assert any(e.startswith("spec.clusterQueue:") for e in crd_errors({**local, "spec": {"clusterQueue": "Team_A"}}))
    wpc = {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": "p"}, "value": 1}
    assert crd_errors(wpc) == []
    assert any("value" in e for e in crd_errors({**wpc, "value": "high"}))
    assert crd_errors({**wpc, "kind": "Workload"}) == ["no published CRD for kind 'Workload'"]
