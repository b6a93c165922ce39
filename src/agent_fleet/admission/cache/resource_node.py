"""Quota arithmetic of ClusterQueues and Cohorts, exactly as Kueue computes it.

This mirrors Kueue's ``pkg/cache/resource_node.go``. Every node (a ClusterQueue or a
Cohort) holds, per (flavor, resource):

* ``quotas``: its own nominal quota, borrowing limit and lending limit;
* ``subtree_quota``: its nominal quota plus what its children lend to it (a child lends
  everything above its *guaranteed* quota, ``subtree - lendingLimit``);
* ``usage``: for a ClusterQueue its admitted usage; for a Cohort the part of its
  children's usage that exceeds their guaranteed quota.

Invariant: ``usage`` of a Cohort equals the sum over children of ``max(0, child usage -
child guaranteed)``; :func:`add_usage` and :func:`remove_usage` keep it while usage moves.
Every write can be journaled (a list of ``(mapping, key, old value)``) so a scheduling
cycle can assume usage and roll it back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent_fleet.admission.objects import ResourceQuota
from agent_fleet.admission.workload import FlavorResource

__all__ = [
    "Journal",
    "QuotaNode",
    "add_usage",
    "available",
    "borrowing_with",
    "guaranteed_quota",
    "is_within_nominal",
    "local_available",
    "node_height",
    "potential_available",
    "quantities_fit_in_quota",
    "remove_usage",
]

Journal = list[tuple[Any, Any, Any]]


class QuotaNode:
    __slots__ = (
        "child_cohorts",
        "child_cqs",
        "fair_weight",
        "is_cq",
        "lendable",
        "name",
        "parent",
        "quotas",
        "subtree_quota",
        "usage",
    )

    def __init__(self, name: str, *, is_cq: bool, fair_weight: float = 1.0) -> None:
        self.name = name
        self.is_cq = is_cq
        self.fair_weight = fair_weight
        # Per resource name, what this node could ever lend (fair sharing's denominator); it
        # depends on quotas only, so it is computed once per configuration.
        self.lendable: dict[str, int] | None = None
        self.parent: QuotaNode | None = None
        self.quotas: dict[FlavorResource, ResourceQuota] = {}
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.child_cqs: list[QuotaNode] = []
        self.child_cohorts: list[QuotaNode] = []

    def path_to_root(self) -> Iterator[QuotaNode]:
        """The parent, its parent, ... up to the root (the node itself excluded)."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_cluster_queues(self) -> Iterator[QuotaNode]:
        yield from self.child_cqs
        for child in self.child_cohorts:
            yield from child.subtree_cluster_queues()

    def nominal(self, fr: FlavorResource) -> int:
        q = self.quotas.get(fr)
        return q.nominal if q is not None else 0

    def __repr__(self) -> str:
        kind = "ClusterQueue" if self.is_cq else "Cohort"
        return f"{kind}({self.name!r})"


def guaranteed_quota(node: QuotaNode, fr: FlavorResource) -> int:
    """Capacity the node never lends to its parent."""
    q = node.quotas.get(fr)
    if q is not None and q.lending_limit is not None:
        return max(0, node.subtree_quota.get(fr, 0) - q.lending_limit)
    return 0


def local_available(node: QuotaNode, fr: FlavorResource) -> int:
    """Guaranteed quota not used yet: available here, invisible to the parent."""
    return max(0, guaranteed_quota(node, fr) - node.usage.get(fr, 0))


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """What the node may still use now: local capacity plus what the parent can give,
    capped by the borrowing limit. Negative when over-admitted (e.g. after a quota cut)."""
    parent = node.parent
    if parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        guaranteed = guaranteed_quota(node, fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - guaranteed
        used_in_parent = max(0, node.usage.get(fr, 0) - guaranteed)
        parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit, parent_available)
    return local_available(node, fr) + parent_available


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most the node could ever use (no usage anywhere), respecting borrowing limits."""
    parent = node.parent
    if parent is None:
        return node.subtree_quota.get(fr, 0)
    result = guaranteed_quota(node, fr) + potential_available(parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        result = min(node.subtree_quota.get(fr, 0) + q.borrowing_limit, result)
    return result


def _set(journal: Journal | None, mapping: dict[FlavorResource, int], fr: FlavorResource, value: int) -> None:
    if journal is not None:
        journal.append((mapping, fr, mapping.get(fr)))
    mapping[fr] = value


def add_usage(node: QuotaNode, fr: FlavorResource, value: int, journal: Journal | None = None) -> None:
    """Add usage and bubble to the parent what exceeds the local guaranteed quota."""
    while True:
        local = local_available(node, fr)
        _set(journal, node.usage, fr, node.usage.get(fr, 0) + value)
        parent = node.parent
        if parent is None or value <= local:
            return
        value -= local
        node = parent


def remove_usage(node: QuotaNode, fr: FlavorResource, value: int, journal: Journal | None = None) -> None:
    """Remove usage, and from the parent the part that was stored there."""
    while True:
        stored_in_parent = node.usage.get(fr, 0) - guaranteed_quota(node, fr)
        _set(journal, node.usage, fr, node.usage.get(fr, 0) - value)
        parent = node.parent
        if stored_in_parent <= 0 or parent is None:
            return
        value = min(value, stored_in_parent)
        node = parent


def borrowing_with(node: QuotaNode, fr: FlavorResource, value: int) -> bool:
    """Whether usage plus ``value`` exceeds the node's own (subtree) quota."""
    return node.usage.get(fr, 0) + value > node.subtree_quota.get(fr, 0)


def is_within_nominal(node: QuotaNode, frs: set[FlavorResource] | frozenset[FlavorResource]) -> bool:
    return all(node.usage.get(fr, 0) <= node.subtree_quota.get(fr, 0) for fr in frs)


def quantities_fit_in_quota(
    node: QuotaNode, requests: dict[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether ``requests`` fit in the node's subtree quota, and what exceeds its guaranteed quota."""
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, value in requests.items():
        if node.usage.get(fr, 0) + value > node.subtree_quota.get(fr, 0):
            fits = False
        remaining[fr] = max(0, value - local_available(node, fr))
    return fits, remaining


def node_height(node: QuotaNode) -> int:
    """Distance to the furthest leaf; a Cohort with only ClusterQueues has height 1."""
    height = min(len(node.child_cqs) + len(node.child_cohorts), 1)
    for child in node.child_cohorts:
        height = max(height, node_height(child) + 1)
    return height
