"""Classical preemption: which admitted workloads to evict so a head fits
(Kueue's ``pkg/scheduler/preemption``: ``classical/hierarchical_preemption.go``,
``classical/candidate_generator.go``, ``preemption.go``).

Candidates come in three kinds, tried in this order:

1. *hierarchy* candidates — workloads of other ClusterQueues over which the preemptor has a
   hierarchical advantage (the request fits within a subtree the preemptor belongs to);
   preempted whatever their priority (reason ``InCohortReclamation``);
2. *priority* candidates — workloads of borrowing ClusterQueues in the cohort tree,
   allowed by ``reclaimWithinCohort``; with ``borrowWithinCohort`` and a priority below
   the threshold they may be taken while the preemptor borrows
   (``InCohortReclaimWhileBorrowing``), otherwise only if it ends within nominal quota
   (``InCohortReclamation``);
3. *same queue* candidates allowed by ``withinClusterQueue`` (``InClusterQueue``).

Each kind is sorted by :func:`candidate_order`. Victims are removed one by one until the
head fits, then added back in reverse order while it still fits: a minimal set.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_fleet.admission.cache.cache import ClusterQueueNode, Snapshot
from agent_fleet.admission.cache.resource_node import (
    QuotaNode,
    available,
    borrowing_with,
    is_within_nominal,
    quantities_fit_in_quota,
)
from agent_fleet.admission.scheduler.ordering import candidate_order
from agent_fleet.admission.workload import FlavorResource, WorkloadInfo

__all__ = [
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_COHORT_RECLAMATION",
    "Context",
    "Target",
    "fill_back",
    "get_targets",
    "satisfies_policy",
]

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

# Preemption variants of a candidate.
_NEVER, _WITHIN_CQ, _HIERARCHICAL, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_REASON = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL: IN_COHORT_RECLAMATION,
    _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True, slots=True)
class Target:
    victim: WorkloadInfo
    reason: str


@dataclass(slots=True)
class _Candidate:
    info: WorkloadInfo
    lca: QuotaNode | None
    variant: int


def satisfies_policy(preemptor: WorkloadInfo, candidate: WorkloadInfo, policy: str) -> bool:
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        if candidate.priority < preemptor.priority:
            return True
        return candidate.priority == preemptor.priority and preemptor.created < candidate.created
    return policy == "Any"


class Context:
    __slots__ = ("cq", "frs", "preemptor", "requests", "snapshot")

    def __init__(
        self,
        preemptor: WorkloadInfo,
        cq: ClusterQueueNode,
        requests: dict[FlavorResource, int],
        frs: frozenset[FlavorResource],
        snapshot: Snapshot,
    ) -> None:
        self.preemptor, self.cq, self.requests, self.frs, self.snapshot = preemptor, cq, requests, frs, snapshot

    def uses_resources(self, info: WorkloadInfo) -> bool:
        return any(fr in self.frs for fr in info.usage)

    def classify(self, info: WorkloadInfo, hierarchical_advantage: bool) -> int:
        if not self.uses_resources(info):
            return _NEVER
        preemption = self.cq.spec.preemption
        same = info.cluster_queue == self.cq.name
        policy = preemption.within_cluster_queue if same else preemption.reclaim_within_cohort
        if not satisfies_policy(self.preemptor, info, policy):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if hierarchical_advantage:
            return _HIERARCHICAL
        if preemption.borrow_within_cohort == "Never":
            return _RECLAIM_WITHOUT_BORROWING
        threshold = preemption.max_priority_threshold
        if info.priority >= self.preemptor.priority or (threshold is not None and info.priority > threshold):
            return _RECLAIM_WITHOUT_BORROWING
        return _RECLAIM_WHILE_BORROWING

    def from_cq(self, cq: ClusterQueueNode, lca: QuotaNode | None, advantage: bool) -> list[_Candidate]:
        out = []
        for info in cq.workloads.values():
            variant = self.classify(info, advantage)
            if variant != _NEVER:
                out.append(_Candidate(info, lca, variant))
        return out

    def collect_subtree(
        self,
        current: QuotaNode,
        subtree_root: QuotaNode,
        skip: QuotaNode | None,
        advantage: bool,
        out: list[_Candidate],
    ) -> None:
        for child in current.child_cohorts:
            if child is skip or is_within_nominal(child, self.frs):
                continue
            self.collect_subtree(child, subtree_root, skip, advantage, out)
        for child_cq in current.child_cqs:
            if child_cq is self.cq or is_within_nominal(child_cq, self.frs):
                continue
            assert isinstance(child_cq, ClusterQueueNode)
            out.extend(self.from_cq(child_cq, subtree_root, advantage))

    def hierarchical(self) -> tuple[list[_Candidate], list[_Candidate]]:
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if self.cq.parent is None or self.cq.spec.preemption.reclaim_within_cohort == "Never":
            return hierarchy, priority
        advantage, remaining = quantities_fit_in_quota(self.cq, self.requests)
        previous: QuotaNode | None = None
        for node in self.cq.path_to_root():
            self.collect_subtree(node, node, previous, advantage, hierarchy if advantage else priority)
            fits, remaining = quantities_fit_in_quota(node, remaining)
            advantage = advantage or fits
            previous = node
        return hierarchy, priority

    def valid(self, candidate: _Candidate, borrow: bool) -> bool:
        """Earlier removals may leave a candidate's queue within nominal quota: then it is spared."""
        if candidate.info.cluster_queue == self.cq.name:
            return True
        if borrow and candidate.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        cq = self.snapshot.cluster_queues[candidate.info.cluster_queue]
        if is_within_nominal(cq, self.frs):
            return False
        for node in cq.path_to_root():
            if node is candidate.lca:
                break
            if is_within_nominal(node, self.frs):
                return False
        return True

    def fits(self, allow_borrowing: bool) -> bool:
        cq = self.cq
        for fr, value in self.requests.items():
            if not allow_borrowing and borrowing_with(cq, fr, value):
                return False
            if value > max(0, available(cq, fr)):
                return False
        return True

    def under_nominal(self) -> bool:
        return all(self.cq.usage.get(fr, 0) < self.cq.nominal(fr) for fr in self.frs)


def get_targets(
    preemptor: WorkloadInfo,
    cq: ClusterQueueNode,
    requests: dict[FlavorResource, int],
    frs_need_preemption: frozenset[FlavorResource],
    snapshot: Snapshot,
) -> list[Target]:
    """The minimal set of workloads to evict so ``requests`` fit in ``cq``; empty if none works.

    The snapshot is left exactly as it was found.
    """
    ctx = Context(preemptor, cq, requests, frs_need_preemption, snapshot)
    same_queue = ctx.from_cq(cq, None, False) if cq.spec.preemption.within_cluster_queue != "Never" else []
    hierarchy, priority = ctx.hierarchical()

    def key(c: _Candidate) -> tuple[int, int, float, str]:
        return candidate_order(c.info, cq.name)

    hierarchy.sort(key=key)
    priority.sort(key=key)
    same_queue.sort(key=key)
    candidates = hierarchy + priority + same_queue

    forbidden = cq.spec.preemption.borrow_within_cohort == "Never"
    if (not hierarchy and not priority) or (forbidden and not ctx.under_nominal()):
        attempts = [True]
    elif forbidden and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]

    for allow_borrowing in attempts:
        mark = snapshot.mark()
        targets: list[Target] = []
        for candidate in candidates:
            if not ctx.valid(candidate, allow_borrowing):
                continue
            snapshot.remove_workload(candidate.info)
            targets.append(Target(candidate.info, _REASON[candidate.variant]))
            if ctx.fits(allow_borrowing):
                targets = fill_back(ctx, targets, allow_borrowing)
                snapshot.rollback(mark)
                return targets
        snapshot.rollback(mark)
    return []


def fill_back(ctx: Context, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """Add victims back, newest removal first (the last one stays), while the head still fits."""
    for i in range(len(targets) - 2, -1, -1):
        ctx.snapshot.add_workload(targets[i].victim)
        if ctx.fits(allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            ctx.snapshot.remove_workload(targets[i].victim)
    return targets
