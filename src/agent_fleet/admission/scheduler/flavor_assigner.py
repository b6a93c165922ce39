"""Flavor assignment: which flavor serves each requested resource, and how (Kueue's
``pkg/scheduler/flavorassigner``).

For every resource group, flavors are tried in the ClusterQueue's order. Each (flavor,
resource) is classified as in ``fitsResourceQuota``: more than the queue could ever reach
is ``NoFit`` (reason ``ExceedsMaxQuota``); within what is available now is ``Fit``;
otherwise preemption is simulated when it could help (within nominal quota, reclaimable in
the hierarchy, or borrowWithinCohort enabled), else ``NoFit`` (``WaitingForQuota``).
``flavorFungibility`` decides whether to stop at a flavor that needs borrowing or
preemption, and which of the tried flavors is preferred.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.admission.cache.cache import ClusterQueueNode
from agent_fleet.admission.cache.resource_node import (
    available,
    borrowing_with,
    local_available,
    node_height,
    potential_available,
)
from agent_fleet.admission.objects import FlavorFungibility, ResourceGroup
from agent_fleet.admission.workload import FlavorResource, WorkloadInfo

__all__ = [
    "FIT",
    "NO_FIT",
    "PREEMPT",
    "Assignment",
    "Oracle",
    "assign_flavors",
    "lowest_subtree_that_fits",
]

# FlavorAssignmentMode, ordered worst to best.
NO_FIT, PREEMPT, FIT = 0, 1, 2
MODE_NAMES = {NO_FIT: "NoFit", PREEMPT: "Preempt", FIT: "Fit"}

# Granular preemption modes, ordered worst to best.
G_NO_FIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = 0, 1, 2, 3, 4
_TO_MODE = {G_NO_FIT: NO_FIT, G_NO_CANDIDATES: PREEMPT, G_PREEMPT: PREEMPT, G_RECLAIM: PREEMPT, G_FIT: FIT}

# Reasons a workload could not reserve quota, as Kueue words them; higher is more severe.
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
WAITING_FOR_QUOTA = "WaitingForQuota"
_SEVERITY = {"": 0, WAITING_FOR_QUOTA: 1, NO_MATCHING_FLAVOR: 2, EXCEEDS_MAX_QUOTA: 3}

# (cq, workload, flavor-resource, quantity) -> (granular mode, borrowing level after preemption)
Oracle = Callable[[ClusterQueueNode, WorkloadInfo, FlavorResource, int], tuple[int, int]]


@dataclass(slots=True)
class Assignment:
    mode: int = FIT
    flavors: dict[str, str] = field(default_factory=dict)  # resource -> flavor
    modes: dict[str, int] = field(default_factory=dict)  # resource -> mode
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    borrowing: int = 0  # how far up the cohort tree the quota comes from; 0 = own quota
    reason: str = ""
    messages: list[str] = field(default_factory=list)

    def needs_preemption(self) -> frozenset[FlavorResource]:
        return frozenset((self.flavors[r], r) for r, m in self.modes.items() if m == PREEMPT)

    def message(self) -> str:
        return "; ".join(self.messages)


def lowest_subtree_that_fits(cq: ClusterQueueNode, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """Height of the lowest subtree that fits ``value`` more of ``fr`` (0: the queue itself),
    and whether that subtree is smaller than the whole cohort tree."""
    parent = cq.parent
    if parent is None or not borrowing_with(cq, fr, value):
        return 0, parent is not None
    remaining = value - local_available(cq, fr)
    for node in cq.path_to_root():
        if not borrowing_with(node, fr, remaining):
            return node_height(node), node.parent is not None
        remaining -= local_available(node, fr)
    return node_height(parent.root()), False


def _preferred(a: tuple[int, int], b: tuple[int, int], fungibility: FlavorFungibility) -> bool:
    """Whether granular mode ``a`` (preemption mode, borrowing level) beats ``b``."""
    if a[0] == G_NO_FIT:
        return False
    if b[0] == G_NO_FIT:
        return True
    a_none, b_none = a[0] == G_NO_CANDIDATES, b[0] == G_NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if fungibility.preference == "PreemptionOverBorrowing":
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _try_next(mode: tuple[int, int], fungibility: FlavorFungibility) -> bool:
    if mode[0] in (G_NO_FIT, G_NO_CANDIDATES):
        return True
    if mode[0] in (G_PREEMPT, G_RECLAIM) and fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return mode[1] != 0 and fungibility.when_can_borrow == "TryNextFlavor"


def _fits_resource_quota(
    cq: ClusterQueueNode, info: WorkloadInfo, fr: FlavorResource, value: int, oracle: Oracle, fair: bool
) -> tuple[int, int, str, str]:
    """(granular mode, borrowing level, no-fit reason, message) for one flavor-resource."""
    max_capacity = potential_available(cq, fr)
    if value > max_capacity:
        return (
            G_NO_FIT,
            0,
            EXCEEDS_MAX_QUOTA,
            f"insufficient quota for {fr[1]} in flavor {fr[0]}, request ({value}) > maximum capacity ({max_capacity})",
        )
    borrow, may_reclaim_in_hierarchy = lowest_subtree_that_fits(cq, fr, value)
    free = max(0, available(cq, fr))
    if value <= free:
        return G_FIT, borrow, "", ""
    message = f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, {value - free} more needed"
    preemption = cq.spec.preemption
    # Under fair sharing, reclaiming in the cohort may leave the queue borrowing.
    can_preempt_while_borrowing = preemption.borrow_within_cohort != "Never" or (
        fair and preemption.reclaim_within_cohort != "Never"
    )
    if cq.nominal(fr) >= value or may_reclaim_in_hierarchy or can_preempt_while_borrowing:
        mode, borrow_after = oracle(cq, info, fr, value)
        return mode, borrow_after, ("" if mode != G_NO_FIT else WAITING_FOR_QUOTA), message
    return G_NO_FIT, borrow, WAITING_FOR_QUOTA, message


def _assign_group(
    cq: ClusterQueueNode,
    info: WorkloadInfo,
    group: ResourceGroup,
    requests: dict[str, int],
    oracle: Oracle,
    fair: bool,
) -> tuple[dict[str, tuple[str, int, int]] | None, tuple[int, int], str, list[str]]:
    """Best flavor for the resources of one group: ({resource: (flavor, mode, borrow)}, mode, reason, messages)."""
    fungibility = cq.spec.flavor_fungibility
    best: dict[str, tuple[str, int, int]] | None = None
    best_mode = (G_NO_FIT, 1 << 30)
    reason = ""
    messages: list[str] = []
    for fq in group.flavors:
        representative = (G_FIT, 0)
        chosen: dict[str, tuple[str, int, int]] = {}
        for resource, value in requests.items():
            fr = (fq.name, resource)
            gmode, borrow, why, message = _fits_resource_quota(cq, info, fr, value, oracle, fair)
            if message:
                messages.append(message)
            if _SEVERITY[why] > _SEVERITY[reason]:
                reason = why
            mode = (gmode, borrow)
            if _preferred(representative, mode, fungibility):
                representative = mode
            if representative[0] == G_NO_FIT:
                break
            chosen[resource] = (fq.name, _TO_MODE[gmode], borrow)
        if not _try_next(representative, fungibility):
            return chosen, representative, "", messages
        if _preferred(representative, best_mode, fungibility):
            best, best_mode = chosen, representative
    return best, best_mode, reason, messages


def assign_flavors(cq: ClusterQueueNode, info: WorkloadInfo, oracle: Oracle, *, fair: bool = False) -> Assignment:
    """Step 3 of a cycle for one head: flavors and mode (Fit / Preempt / NoFit)."""
    requests = {r: v for r, v in info.requests.items() if r != "pods"}
    if "pods" in cq.group_of:
        # As in Kueue, pods are counted only where the ClusterQueue covers them.
        requests["pods"] = info.pods
    result = Assignment()
    for resource, value in requests.items():
        if resource in result.flavors:
            continue
        group = cq.group_of.get(resource)
        if group is None:
            if value == 0:
                continue
            result.mode = NO_FIT
            result.reason = NO_MATCHING_FLAVOR
            result.messages.append(f"resource {resource} unavailable in ClusterQueue")
            return result
        group_requests = {r: v for r, v in requests.items() if r in group.covered_resources}
        chosen, _, reason, messages = _assign_group(cq, info, group, group_requests, oracle, fair)
        result.messages.extend(messages)
        if chosen is None or len(chosen) < len(group_requests):
            result.mode = NO_FIT
            result.reason = reason or WAITING_FOR_QUOTA
            return result
        for r, (flavor, mode, borrow) in chosen.items():
            result.flavors[r] = flavor
            result.modes[r] = mode
            result.usage[(flavor, r)] = group_requests[r]
            result.borrowing = max(result.borrowing, borrow)
            result.mode = min(result.mode, mode)
    if result.mode == FIT:
        result.messages.clear()
    return result
