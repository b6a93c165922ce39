"""The order of a cycle's heads under fair sharing (Kueue's ``fairSharingIterator``).

Heads are taken one at a time, each against the usage the cycle has assumed so far. For the
cohort tree of the next head, a tournament runs from the root: every Cohort nominates the best
head of its subtree, comparing its children after admitting their nominee: first those that would
not borrow from the Cohort on the flavors the nominee requests (Kueue's
``FairSharingPrioritizeNonBorrowing``, on by default), then by dominant resource share (lower
first), then by priority (higher first), then by creation time (older first), then by name.
The winner at the root is processed next. A head whose ClusterQueue has no cohort is processed
as it comes.

Kueue picks the next cohort tree in no particular order; here it is the tree of the first
remaining head in the classical order, which is as good (trees share no quota).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

from agent_fleet.admission.cache.cache import ClusterQueueNode, Snapshot
from agent_fleet.admission.cache.fair_sharing import ShareKey, dominant_resource_share
from agent_fleet.admission.cache.resource_node import QuotaNode
from agent_fleet.admission.objects import FairSharing
from agent_fleet.admission.scheduler.flavor_assigner import Assignment
from agent_fleet.admission.workload import WorkloadInfo

__all__ = ["FairEntry", "fair_order"]


class FairEntry(Protocol):
    info: WorkloadInfo
    cq: ClusterQueueNode
    assignment: Assignment


E = TypeVar("E", bound=FairEntry)


# Per (Cohort, head): (the child on the head's path borrows on the head's flavors, its share).
_Shares = dict[tuple[int, str], tuple[bool, ShareKey]]


def fair_order(entries: Sequence[E], snapshot: Snapshot, fair: FairSharing) -> Iterator[E]:
    """Yield the entries in fair-sharing order; the caller processes each (and may change the
    snapshot's usage) before asking for the next."""
    remaining: dict[str, E] = {e.cq.name: e for e in entries}
    # A ClusterQueue contributes one head per cycle; a later duplicate (none today) would wait.
    queue = list(entries)
    while remaining:
        first = next(e for e in queue if remaining.get(e.cq.name) is e)
        if first.cq.parent is None:
            chosen = first
        else:
            root = first.cq.root()
            winner = _tournament(root, remaining, _shares(root, remaining, snapshot, fair.prioritize_non_borrowing))
            assert winner is not None
            chosen = winner
        del remaining[chosen.cq.name]
        queue.remove(chosen)
        yield chosen


def _shares(root: QuotaNode, remaining: dict[str, E], snapshot: Snapshot, non_borrowing_first: bool) -> _Shares:
    """Per (Cohort, head): how the Cohort's child on the head's path stands with the head admitted."""
    shares: _Shares = {}
    for cq in root.subtree_cluster_queues():
        entry = remaining.get(cq.name)
        if entry is None:
            continue
        usage = entry.assignment.usage
        mark = snapshot.mark()
        snapshot.add_usage(cq, usage)
        node: QuotaNode = cq
        for ancestor in cq.path_to_root():
            borrows = non_borrowing_first and any(node.usage.get(fr, 0) > node.subtree_quota.get(fr, 0) for fr in usage)
            shares[(id(ancestor), entry.info.name)] = (borrows, dominant_resource_share(node))
            node = ancestor
        snapshot.rollback(mark)
    return shares


def _less(a: FairEntry, b: FairEntry, cohort: QuotaNode, shares: _Shares) -> bool:
    ka = (*shares[(id(cohort), a.info.name)], -a.info.priority, a.info.created, a.info.name)
    kb = (*shares[(id(cohort), b.info.name)], -b.info.priority, b.info.created, b.info.name)
    return ka < kb


def _tournament(cohort: QuotaNode, remaining: dict[str, E], shares: _Shares) -> E | None:
    candidates: list[E] = []
    for child in cohort.child_cohorts:
        nominee = _tournament(child, remaining, shares)
        if nominee is not None:
            candidates.append(nominee)
    for child_cq in cohort.child_cqs:
        entry = remaining.get(child_cq.name)
        if entry is not None:
            candidates.append(entry)
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _less(current, best, cohort, shares):
            best = current
    return best
