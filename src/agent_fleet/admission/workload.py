"""Workloads: what asks for admission, and the record the controller keeps of each."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FlavorResource", "Workload", "WorkloadInfo"]

# (flavor, resource): the unit every quota and usage is kept in.
FlavorResource = tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """One agent session asking to run.

    ``queue`` names a LocalQueue (``ns/name``, or ``name`` in namespace ``default``).
    ``requests`` are the session's total requests (quantities as Kueue spells them); it
    counts as one pod unless ``requests["pods"]`` says otherwise. ``defaults`` are requests
    counted only where the ClusterQueue covers the resource, as ``pods`` is (a session's
    sandbox ``cpu`` and ``memory`` from fleet.yaml ``hands``, which a ClusterQueue of ``pods``
    alone leaves out); a name in both counts as ``requests`` says. ``owner`` is opaque to
    admission (the engine puts the agent session id there).
    """

    name: str
    queue: str
    requests: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    priority: int | None = None
    priority_class: str | None = None
    created: float = 0.0
    owner: str | None = None


class WorkloadInfo:
    """The controller's mutable record of one workload (pending or admitted)."""

    __slots__ = (
        "admitted_at",
        "cluster_queue",
        "created",
        "equivalence",
        "last_reason",
        "local_queue",
        "name",
        "namespace",
        "pods",
        "priority",
        "queued_at",
        "requests",
        "usage",
        "workload",
    )

    def __init__(
        self,
        *,
        workload: Workload,
        namespace: str,
        local_queue: str,
        cluster_queue: str,
        priority: int,
        requests: dict[str, int],
        pods: int,
        now: float,
    ) -> None:
        self.workload = workload
        self.name = workload.name
        self.namespace = namespace
        self.local_queue = local_queue
        self.cluster_queue = cluster_queue
        self.priority = priority
        # Queue order uses the creation time, also after a preemption (Kueue orders evicted
        # workloads by creation time while priority sorting within the cohort is on).
        self.created = workload.created
        self.requests = requests
        self.pods = pods
        self.usage: dict[FlavorResource, int] = {}
        self.admitted_at: float | None = None
        self.queued_at = now
        self.last_reason = ""
        # Kueue's scheduling equivalence hash: workloads alike in everything the scheduler
        # looks at (priority and requests) get the same verdict in the same state.
        self.equivalence: tuple[object, ...] = (priority, pods, tuple(sorted(requests.items())))

    def __repr__(self) -> str:
        state = "admitted" if self.admitted_at is not None else "pending"
        return f"WorkloadInfo({self.name!r}, cq={self.cluster_queue!r}, prio={self.priority}, {state})"
