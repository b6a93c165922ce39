"""The two orders of a cycle.

* :func:`entry_order` — heads across ClusterQueues (Kueue's classical iterator): those that
  fit without borrowing first (lower borrowing level first), then higher priority, then
  older, then name.
* :func:`candidate_order` — preemption victims (Kueue's ``CandidatesOrdering``): workloads
  of other ClusterQueues before the preemptor's own, then lower priority, then the most
  recently admitted, then name.
"""

from __future__ import annotations

from agent_fleet.admission.workload import WorkloadInfo

__all__ = ["candidate_order", "entry_order"]


def entry_order(borrowing: int, info: WorkloadInfo) -> tuple[int, int, float, str]:
    return (borrowing, -info.priority, info.created, info.name)


def candidate_order(info: WorkloadInfo, preemptor_cq: str) -> tuple[int, int, float, str]:
    admitted = info.admitted_at if info.admitted_at is not None else float("inf")
    return (1 if info.cluster_queue == preemptor_cq else 0, info.priority, -admitted, info.name)
