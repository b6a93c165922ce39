"""Sandbox Jobs for Kueue (``queues export --jobs``): labelled, suspended, with requests and limits
with headroom, no credential, and valid against Kubernetes' published schemas (kubernetes-validate)."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml
from admission_builders import cq, flavor, lq

from agent_fleet.admission import parse_objects
from agent_fleet.admission.kueue_export import dump_yaml
from agent_fleet.admission.kueue_jobs import (
    PARTITION_PATH,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SandboxJobSpec,
    job_name,
    sandbox_jobs,
    uncovered_resources,
)
from agent_fleet.admission.objects import LocalQueue
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.errors import ConfigError

RUN = "run-0190f00dbeef42a1b2"
# The oldest Kubernetes minor Kueue v1beta2 runs on that the package ships schemas for, and the newest.
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
SPEC = SandboxJobSpec(
    image="registry.example/agent:1",
    command="claude -p 'Find bugs' < /fleet/partition.txt",
    task="Find bugs",
    gateway_url="http://gateway.fleet.svc:8787/",
    requests={"cpu": "500m", "memory": "512Mi"},
    limits={"cpu": 1, "memory": "1Gi"},
    env={"NO_COLOR": "1"},
    timeout_s=90.5,
    backoff_limit=3,
)


def partitions(*groups: tuple[str, ...]) -> list[Partition]:
    return [
        Partition(id=f"p{i:04d}", index=i, kind=InputKind.LIST, items=items, item_ids=(), est_tokens=10)
        for i, items in enumerate(groups)
    ]


def jobs(**kwargs: Any) -> list[dict[str, Any]]:
    queue = kwargs.pop("queue", LocalQueue(namespace="ml", name="team-a", cluster_queue="cq"))
    parts = kwargs.pop("parts", partitions(("https://a.example/1", "https://a.example/2"), ("x",)))
    docs = sandbox_jobs(RUN, parts, queue=queue, priority_class=kwargs.pop("priority", "agent-prod"), spec=SPEC)
    return list(yaml.safe_load_all(dump_yaml(docs)))


def test_one_configmap_and_one_suspended_job_per_session_labelled_for_kueue() -> None:
    docs = jobs()
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ConfigMap", f"{RUN}-s00000-partition"),
        ("Job", f"{RUN}-s00000"),
        ("ConfigMap", f"{RUN}-s00001-partition"),
        ("Job", f"{RUN}-s00001"),
    ]
    job = docs[1]
    assert job["metadata"]["namespace"] == "ml"  # the LocalQueue's namespace
    assert job["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    assert job["metadata"]["labels"][PRIORITY_LABEL] == "agent-prod"
    assert job["metadata"]["labels"]["agent-fleet/session"] == f"{RUN}.s00000"
    assert job["spec"]["suspend"] is True
    assert job["spec"]["backoffLimit"] == 3 and job["spec"]["activeDeadlineSeconds"] == 91
    assert docs[0]["data"] == {"partition.txt": "https://a.example/1\nhttps://a.example/2\n"}
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert pod["volumes"][1] == {"name": "partition", "configMap": {"name": f"{RUN}-s00000-partition"}}
    (container,) = pod["containers"]
    assert container["command"] == ["/bin/sh", "-c", SPEC.command]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": 1, "memory": "1Gi"},
    }


def test_without_a_priority_class_there_is_no_priority_label() -> None:
    job = jobs(priority=None)[1]
    assert PRIORITY_LABEL not in job["metadata"]["labels"]
    assert job["metadata"]["labels"][QUEUE_LABEL] == "team-a"


def test_the_gateway_token_is_a_secret_reference_never_a_value() -> None:
    env = {e["name"]: e for e in jobs()[1]["spec"]["template"]["spec"]["containers"][0]["env"]}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert "value" not in env[key]
        assert env[key]["valueFrom"] == {"secretKeyRef": {"name": f"{RUN}-s00000-token", "key": "token"}}
    assert env["OPENAI_BASE_URL"]["value"] == "http://gateway.fleet.svc:8787/v1"
    assert env["ANTHROPIC_BASE_URL"]["value"] == "http://gateway.fleet.svc:8787"
    assert env["FLEET_PARTITION"]["value"] == PARTITION_PATH
    assert env["FLEET_SESSION_ID"]["value"] == f"{RUN}.s00000"
    assert env["NO_COLOR"]["value"] == "1"
    assert not any(d["kind"] == "Secret" for d in jobs())


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_against_kubernetes_published_schemas(version: str) -> None:
    for doc in jobs():
        assert kubernetes_validate.validate(doc, version, strict=True) is not None


@pytest.mark.parametrize(
    ("mutate", "found"),
    [
        (lambda job: job["spec"].update(suspend="yes"), "is not of type 'boolean'"),
        (lambda job: job["spec"].update(suspended=True), "'suspended' was unexpected"),
        (lambda job: job["spec"]["template"]["spec"].pop("containers"), "'containers' is a required property"),
    ],
)
def test_the_schema_check_finds_a_broken_job(mutate: Any, found: str) -> None:
    job = copy.deepcopy(jobs()[1])
    mutate(job)
    with pytest.raises(kubernetes_validate.ValidationError, match=found):
        kubernetes_validate.validate(job, VERSIONS[-1], strict=True)


def test_job_names_are_dns_labels_of_the_session_id() -> None:
    assert job_name(RUN, 7) == f"{RUN}-s00007"
    assert len(job_name(RUN, 99999)) <= 63


def test_a_partition_larger_than_a_configmap_is_refused() -> None:
    big = partitions(tuple("x" * 1000 for _ in range(1100)))
    with pytest.raises(ConfigError, match="partition p0000: its items take more than"):
        jobs(parts=big)


def test_uncovered_resources_are_those_kueue_would_hold_a_job_for() -> None:
    queues = [cq("pods-only", {"pods": 5}), cq("full", {"pods": 5, "cpu": 5, "memory": "8Gi"})]
    objects = parse_objects([flavor(), *queues, lq("a", "pods-only"), lq("b", "full")])
    a, b = objects.local_queues["default/a"], objects.local_queues["default/b"]
    assert uncovered_resources(objects, a, ["pods", "cpu", "memory"]) == ["cpu", "memory"]
    assert uncovered_resources(objects, b, ["pods", "cpu", "memory"]) == []
