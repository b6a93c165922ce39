"""Dominant resource share, as Kueue's fair sharing computes it (``pkg/cache/fair_sharing.go``).

For a ClusterQueue or Cohort with a parent: per resource name, what the node uses above its own
(subtree) quota, summed over flavors, divided by what the parent could lend of that resource
(``potential_available`` of the parent, summed over every flavor of the tree), times 1,000; the
largest of these ratios, divided by the node's ``fairSharing.weight``. Zero means the node does
not borrow. A node with weight 0 that borrows ranks above every other node (its share is
infinite); two such nodes compare by their unweighted ratios.

Shares are compared through :func:`share_key`, which turns a share into a totally ordered tuple
with exactly Kueue's ``CompareDRS`` order.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_fleet.admission.cache.resource_node import QuotaNode, potential_available
from agent_fleet.admission.workload import FlavorResource

__all__ = ["NEGATIVE_SHARE", "ShareKey", "dominant_resource_share", "is_zero_share", "lendable_of"]

# (1, unweighted ratio) for a zero-weight node that borrows, else (0, ratio / weight).
ShareKey = tuple[int, float]
NEGATIVE_SHARE: ShareKey = (0, -1.0)  # below every share; the start of a maximum search


def lendable_of(node: QuotaNode) -> dict[str, int]:
    """Per resource name, the capacity ``node`` could lend to its children."""
    if node.lendable is None:
        root = node.root()
        lendable: dict[str, int] = {}
        for fr in root.subtree_quota:
            lendable[fr[1]] = lendable.get(fr[1], 0) + potential_available(node, fr)
        node.lendable = lendable
    return node.lendable


def dominant_resource_share(node: QuotaNode, extra: Mapping[FlavorResource, int] | None = None) -> ShareKey:
    """The node's share, counting ``extra`` usage as if it were admitted to the node."""
    parent = node.parent
    if parent is None:
        return (0, 0.0)
    usage = node.usage
    borrowing: dict[str, int] = {}
    for fr, quota in node.subtree_quota.items():
        borrowed = usage.get(fr, 0) - quota
        if extra:
            borrowed += extra.get(fr, 0)
        if borrowed > 0:
            borrowing[fr[1]] = borrowing.get(fr[1], 0) + borrowed
    if not borrowing:
        return (0, 0.0)
    lendable = lendable_of(parent)
    ratio = 0.0
    for resource, borrowed in borrowing.items():
        available = lendable.get(resource, 0)
        if available > 0:
            ratio = max(ratio, borrowed * 1000.0 / available)
    if ratio == 0.0:
        return (0, 0.0)
    if node.fair_weight == 0:
        return (1, ratio)
    return (0, ratio / node.fair_weight)


def is_zero_share(share: ShareKey) -> bool:
    return share == (0, 0.0)
