"""Sandbox Jobs for a cluster with Kueue: one suspended ``batch/v1`` Job per agent session of a plan
(``agent-fleet queues export --jobs``).

Each Job is what Kueue expects of a Job it manages: the label ``kueue.x-k8s.io/queue-name`` names
the session's LocalQueue (the Job lives in that LocalQueue's namespace), ``kueue.x-k8s.io/priority-
class`` its WorkloadPriorityClass when the run has one, and ``spec.suspend: true`` until Kueue admits
it. Its one container runs the session's CLI agent under the sandbox's requests and limits (limits =
requests × headroom, strictly above them), so the Workload Kueue derives asks for one pod plus those
requests. The partition's items reach the pod as a file from a ConfigMap of the session; the gateway
is reached at its URL with the session's own token read from a Secret the export names and never
writes (``<job>-token``, key ``token``): no credential is in any manifest.

Names: a Job is named after its session id (``run-….s00001`` becomes ``run-…-s00001``, a DNS-1123
label), its ConfigMap ``<job>-partition``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.admission.objects import KueueObjects, LocalQueue
from agent_fleet.domain.ids import session_id_for
from agent_fleet.domain.plan import Partition
from agent_fleet.errors import ConfigError

__all__ = [
    "ANALYTICS_PATH",
    "PARTITION_PATH",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "TOKEN_KEY",
    "SandboxJobSpec",
    "job_name",
    "sandbox_jobs",
    "uncovered_resources",
]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
TOKEN_KEY = "token"
WORKSPACE = "/workspace"
PARTITION_DIR = "/fleet"
PARTITION_PATH = f"{PARTITION_DIR}/partition.txt"
ANALYTICS_PATH = f"{WORKSPACE}/.fleet-analytics.jsonl"
# A ConfigMap holds at most 1 MiB; leave room for its metadata.
_MAX_PARTITION_BYTES = 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxJobSpec:
    """What every session's Job runs: ``command`` through ``/bin/sh -c`` in ``image``, working in
    an empty ``/workspace``; ``requests`` and ``limits`` as Kubernetes quantities; ``gateway_url``
    is the gateway's root URL as pods reach it (OpenAI clients get ``…/v1``)."""

    image: str
    command: str
    task: str
    gateway_url: str
    requests: Mapping[str, int | str]
    limits: Mapping[str, int | str]
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    backoff_limit: int = 0


def job_name(run_id: str, index: int) -> str:
    """The Job of the session with leaf ``index``: its session id as a DNS-1123 label."""
    return session_id_for(run_id, index).replace(".", "-").lower()


def uncovered_resources(objects: KueueObjects, queue: LocalQueue, resources: Sequence[str]) -> list[str]:
    """The resources a Job requests that ``queue``'s ClusterQueue does not cover: Kueue keeps such a
    Job pending ("resource … unavailable in ClusterQueue"). ``pods`` is counted only where covered."""
    cq = objects.cluster_queues.get(queue.cluster_queue)
    if cq is None:
        return [r for r in resources if r != "pods"]
    return [r for r in resources if r != "pods" and not cq.covers(r)]


def _env(spec: SandboxJobSpec, session_id: str, secret: str) -> list[dict[str, Any]]:
    root = spec.gateway_url.rstrip("/")
    plain = {
        **spec.env,
        "FLEET_TASK": spec.task,
        "FLEET_PARTITION": PARTITION_PATH,
        "FLEET_SESSION_ID": session_id,
        "FLEET_ANALYTICS_LOG": ANALYTICS_PATH,
        "OPENAI_BASE_URL": root + "/v1",
        "ANTHROPIC_BASE_URL": root,
    }
    env: list[dict[str, Any]] = [{"name": k, "value": plain[k]} for k in sorted(plain)]
    token = {"secretKeyRef": {"name": secret, "key": TOKEN_KEY}}
    env += [{"name": name, "valueFrom": token} for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")]
    return env


def _config_map(name: str, namespace: str, labels: Mapping[str, str], partition: Partition) -> dict[str, Any]:
    text = "".join(f"{item}\n" for item in partition.items)
    if len(text.encode()) > _MAX_PARTITION_BYTES:
        raise ConfigError(
            f"partition {partition.id}: its items take more than {_MAX_PARTITION_BYTES} bytes, "
            "more than a ConfigMap holds; use more --agents"
        )
    meta = {"name": name, "namespace": namespace, "labels": dict(labels)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"partition.txt": text}}


def _job(
    name: str, namespace: str, labels: Mapping[str, str], pod_labels: Mapping[str, str], spec: SandboxJobSpec, env: Any
) -> dict[str, Any]:
    container = {
        "name": "agent",
        "image": spec.image,
        "command": ["/bin/sh", "-c", spec.command],
        "workingDir": WORKSPACE,
        "env": env,
        "resources": {"requests": dict(spec.requests), "limits": dict(spec.limits)},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "workspace", "mountPath": WORKSPACE},
            {"name": "partition", "mountPath": PARTITION_DIR, "readOnly": True},
        ],
    }
    job_spec: dict[str, Any] = {"suspend": True, "backoffLimit": spec.backoff_limit}
    if spec.timeout_s is not None:
        job_spec["activeDeadlineSeconds"] = max(1, math.ceil(spec.timeout_s))
    job_spec["template"] = {
        "metadata": {"labels": dict(pod_labels)},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [container],
            "volumes": [
                {"name": "workspace", "emptyDir": {}},
                {"name": "partition", "configMap": {"name": f"{name}-partition"}},
            ],
        },
    }
    meta = {"name": name, "namespace": namespace, "labels": dict(labels)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}


def sandbox_jobs(
    run_id: str,
    partitions: Sequence[Partition],
    *,
    queue: LocalQueue,
    priority_class: str | None,
    spec: SandboxJobSpec,
) -> list[dict[str, Any]]:
    """For every partition, its ConfigMap and its Job, in plan order."""
    docs: list[dict[str, Any]] = []
    for partition in partitions:
        name = job_name(run_id, partition.index)
        session_id = session_id_for(run_id, partition.index)
        own = {"agent-fleet/run": run_id, "agent-fleet/session": session_id, "agent-fleet/partition": partition.id}
        labels = {"app.kubernetes.io/name": "agent-fleet", "app.kubernetes.io/component": "sandbox", **own}
        docs.append(_config_map(f"{name}-partition", queue.namespace, labels, partition))
        job_labels = {**labels, QUEUE_LABEL: queue.name}
        if priority_class is not None:
            job_labels[PRIORITY_LABEL] = priority_class
        env = _env(spec, session_id, f"{name}-token")
        docs.append(_job(name, queue.namespace, job_labels, labels, spec, env))
    return docs
