"""Fair-sharing preemption: which admitted workloads to evict so a head fits, when fair sharing
is enabled (Kueue's ``fairPreemptions``, ``fairsharing/ordering.go``, ``fairsharing/target.go``,
``fairsharing/least_common_ancestor.go``; KEP-1714).

Candidates are the preemptor's own workloads allowed by ``withinClusterQueue`` and the
workloads of borrowing ClusterQueues of its cohort tree allowed by ``reclaimWithinCohort``,
each sorted as classical preemption sorts them. The incoming workload's usage is counted as
admitted while victims are chosen, so shares include it.

ClusterQueues are visited from the root of the cohort tree down, always into the child with
the highest dominant resource share that still has candidates (children that do not borrow are
pruned, except on the preemptor's own path). In the preemptor's own ClusterQueue the next
candidate is taken (``InClusterQueue``). Elsewhere the shares of the two *almost least common
ancestors* are compared: the node just below the least common ancestor on the preemptor's side
(its new share, with the incoming workload) and on the target's side. The first strategy is
applied to each candidate of the target in turn:

* ``LessThanOrEqualToFinalShare`` (S2-a): preemptor's new share <= target's share after
  removing the candidate;
* ``LessThanInitialShare`` (S2-b): preemptor's new share < target's share before.

A preemptor that stays within its nominal quota with the incoming workload counted (Kueue's
``FairSharingPreemptWithinNominal``, on by default) skips the strategies: it takes the next
candidate of each visited ClusterQueue as reclamation (``InCohortReclamation``).

A candidate that passes is taken (``InCohortFairSharing``) and the walk restarts from the root,
since shares moved; those that fail are kept for the second strategy, which (when configured)
takes at most one candidate per ClusterQueue under S2-b. Once the head fits, victims are added
back newest first while it still fits: a minimal set. ``borrowWithinCohort`` plays no part here,
as in Kueue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from agent_fleet.admission.cache.cache import ClusterQueueNode, Snapshot
from agent_fleet.admission.cache.fair_sharing import (
    NEGATIVE_SHARE,
    ShareKey,
    dominant_resource_share,
    is_zero_share,
)
from agent_fleet.admission.cache.resource_node import QuotaNode
from agent_fleet.admission.objects import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FairSharing
from agent_fleet.admission.scheduler.ordering import candidate_order
from agent_fleet.admission.scheduler.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Context,
    Target,
    fill_back,
    satisfies_policy,
)
from agent_fleet.admission.workload import FlavorResource, WorkloadInfo

__all__ = ["get_fair_targets"]

# (preemptor's new share, target's old share, target's new share) -> may the candidate go
Strategy = Callable[[ShareKey, ShareKey, ShareKey], bool]

_STRATEGIES: dict[str, Strategy] = {
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: lambda new, _old, target_new: new <= target_new,
    LESS_THAN_INITIAL_SHARE: lambda new, old, _target_new: new < old,
}


def get_fair_targets(
    preemptor: WorkloadInfo,
    cq: ClusterQueueNode,
    requests: dict[FlavorResource, int],
    frs_need_preemption: frozenset[FlavorResource],
    snapshot: Snapshot,
    fair: FairSharing,
) -> list[Target]:
    """The victims that let ``requests`` fit in ``cq`` under fair sharing; empty if none do.

    The snapshot is left exactly as it was found.
    """
    strategies = fair.preemption_strategies
    ctx = Context(preemptor, cq, requests, frs_need_preemption, snapshot)
    candidates = _find_candidates(ctx)
    if not candidates:
        return []
    candidates.sort(key=lambda info: candidate_order(info, cq.name))
    start = snapshot.mark()
    snapshot.add_usage(cq, requests)  # shares count the incoming workload as admitted
    targets: list[Target] = []
    # FairSharingPreemptWithinNominal: a preemptor still within its nominal quota, counting the
    # incoming workload, takes its quota back from borrowers whatever the shares say.
    within_nominal = fair.preempt_within_nominal and not _borrowing(cq, frs_need_preemption)
    fits, retry = _first_strategy(ctx, candidates, _STRATEGIES[strategies[0]], targets, within_nominal)
    if not fits and len(strategies) > 1:
        fits = _second_strategy(ctx, retry, targets)
    if not fits:
        snapshot.rollback(start)
        return []
    snapshot.remove_usage(cq, requests)
    targets = fill_back(ctx, targets, True)
    snapshot.rollback(start)
    return targets


def _find_candidates(ctx: Context) -> list[WorkloadInfo]:
    cq, preemptor = ctx.cq, ctx.preemptor
    policy = cq.spec.preemption
    found: list[WorkloadInfo] = []
    if policy.within_cluster_queue != "Never":
        for info in cq.workloads.values():
            if satisfies_policy(preemptor, info, policy.within_cluster_queue) and ctx.uses_resources(info):
                found.append(info)
    if cq.parent is not None and policy.reclaim_within_cohort != "Never":
        for other in cq.root().subtree_cluster_queues():
            if other is cq or not _borrowing(other, ctx.frs):
                continue
            assert isinstance(other, ClusterQueueNode)
            for info in other.workloads.values():
                if satisfies_policy(preemptor, info, policy.reclaim_within_cohort) and ctx.uses_resources(info):
                    found.append(info)
    return found


def _borrowing(node: QuotaNode, frs: frozenset[FlavorResource]) -> bool:
    return node.parent is not None and any(node.usage.get(fr, 0) > node.subtree_quota.get(fr, 0) for fr in frs)


def _fits(ctx: Context) -> bool:
    """Whether the head fits now; its simulated usage is taken out for the check."""
    mark = ctx.snapshot.mark()
    ctx.snapshot.remove_usage(ctx.cq, ctx.requests)
    ok = ctx.fits(True)
    ctx.snapshot.rollback(mark)
    return ok


def _take(ctx: Context, info: WorkloadInfo, reason: str, targets: list[Target]) -> bool:
    ctx.snapshot.remove_workload(info)
    targets.append(Target(info, reason))
    return _fits(ctx)


def _first_strategy(
    ctx: Context, candidates: list[WorkloadInfo], strategy: Strategy, targets: list[Target], within_nominal: bool
) -> tuple[bool, list[WorkloadInfo]]:
    ordering = _Ordering(ctx, candidates)
    retry: list[WorkloadInfo] = []
    for target in ordering:
        if target is ctx.cq:
            if _take(ctx, ordering.pop(target), IN_CLUSTER_QUEUE, targets):
                return True, []
            continue
        if within_nominal:
            if _take(ctx, ordering.pop(target), IN_COHORT_RECLAMATION, targets):
                return True, []
            continue
        preemptor_new, target_old = ordering.shares(target)
        while ordering.has_workload(target):
            info = ordering.pop(target)
            target_new = ordering.share_after_removal(target, info)
            if strategy(preemptor_new, target_old, target_new):
                if _take(ctx, info, IN_COHORT_FAIR_SHARING, targets):
                    return True, []
                break  # shares moved: choose the next ClusterQueue from the root again
            retry.append(info)
    return False, retry


def _second_strategy(ctx: Context, retry: list[WorkloadInfo], targets: list[Target]) -> bool:
    ordering = _Ordering(ctx, retry)
    for target in ordering:
        preemptor_new, target_old = ordering.shares(target)
        info = ordering.pop(target)
        # The rule does not depend on the candidate: the first one of the queue stands for all.
        if _STRATEGIES[LESS_THAN_INITIAL_SHARE](preemptor_new, target_old, target_old) and _take(
            ctx, info, IN_COHORT_FAIR_SHARING, targets
        ):
            return True
        ordering.drop(target)
    return False


class _Ordering:
    """Kueue's TargetClusterQueueOrdering: the next ClusterQueue to take a candidate from.

    Every step descends from the root into the child with the highest share. Among equal shares
    the child met last wins (children are kept in name order; Kueue leaves this order open), and
    a Cohort wins over a ClusterQueue. Between two steps the caller pops a candidate or drops
    the queue, so the walk progresses.
    """

    def __init__(self, ctx: Context, candidates: list[WorkloadInfo]) -> None:
        self.ctx = ctx
        self.cq = ctx.cq
        self.ancestors = {id(n) for n in self.cq.path_to_root()}
        self.per_cq: dict[str, list[WorkloadInfo]] = {}
        for info in candidates:
            self.per_cq.setdefault(info.cluster_queue, []).append(info)
        self.pruned: set[int] = set()

    def has_workload(self, cq: QuotaNode) -> bool:
        return bool(self.per_cq.get(cq.name))

    def pop(self, cq: QuotaNode) -> WorkloadInfo:
        return self.per_cq[cq.name].pop(0)

    def drop(self, cq: QuotaNode) -> None:
        self.pruned.add(id(cq))

    def __iter__(self) -> Iterator[QuotaNode]:
        if self.cq.parent is None:
            while self.has_workload(self.cq):
                yield self.cq
            return
        root = self.cq.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_cq: QuotaNode | None = None
        best_cq_share = NEGATIVE_SHARE
        for child in cohort.child_cqs:
            if id(child) in self.pruned:
                continue
            share = dominant_resource_share(child)
            # The preemptor's own queue stays while it has candidates, whatever its share.
            if (is_zero_share(share) and child is not self.cq) or not self.has_workload(child):
                self.pruned.add(id(child))
            elif share >= best_cq_share:
                best_cq, best_cq_share = child, share
        best_cohort: QuotaNode | None = None
        best_cohort_share = NEGATIVE_SHARE
        for child in cohort.child_cohorts:
            if id(child) in self.pruned:
                continue
            share = dominant_resource_share(child)
            # A Cohort that does not borrow is pruned, unless the preemptor is below it: there
            # may be imbalance inside it, or preemption in the preemptor's own queue.
            if is_zero_share(share) and id(child) not in self.ancestors:
                self.pruned.add(id(child))
            elif share >= best_cohort_share:
                best_cohort, best_cohort_share = child, share
        if best_cq is None and best_cohort is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and best_cohort_share >= best_cq_share:
            return self._next(best_cohort)
        return best_cq

    def _almost_lcas(self, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
        """The nodes just below the least common ancestor, on the preemptor's and target's side."""
        lca = next(n for n in target.path_to_root() if id(n) in self.ancestors)
        return _child_towards(self.cq, lca), _child_towards(target, lca)

    def shares(self, target: QuotaNode) -> tuple[ShareKey, ShareKey]:
        mine, theirs = self._almost_lcas(target)
        return dominant_resource_share(mine), dominant_resource_share(theirs)

    def share_after_removal(self, target: QuotaNode, info: WorkloadInfo) -> ShareKey:
        snapshot = self.ctx.snapshot
        mark = snapshot.mark()
        snapshot.remove_usage(target, info.usage)
        share = dominant_resource_share(self._almost_lcas(target)[1])
        snapshot.rollback(mark)
        return share


def _child_towards(node: QuotaNode, ancestor: QuotaNode) -> QuotaNode:
    while node.parent is not ancestor:
        assert node.parent is not None
        node = node.parent
    return node
