"""What holds quota: the ClusterQueue/Cohort tree, admitted workloads and their usage.

The cache is the one mutable picture of quota. A scheduling cycle reads it through a
:class:`Snapshot`: every change the cycle makes while deciding (assumed usage, simulated
removal of preemption victims) goes through the snapshot's journal and is undone by
:meth:`Snapshot.rollback`; the cycle then commits its decisions with
:meth:`Cache.add_workload` / :meth:`Cache.remove_workload`. Assume, commit, undo.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_fleet.admission.cache.resource_node import (
    Journal,
    QuotaNode,
    add_usage,
    guaranteed_quota,
    remove_usage,
)
from agent_fleet.admission.objects import ClusterQueue, KueueObjects, ResourceGroup
from agent_fleet.admission.workload import FlavorResource, WorkloadInfo

__all__ = ["Cache", "ClusterQueueNode", "Snapshot"]


class ClusterQueueNode(QuotaNode):
    __slots__ = ("flavors_found", "group_of", "spec", "workloads")

    def __init__(self, spec: ClusterQueue, *, flavors_found: bool = True) -> None:
        super().__init__(spec.name, is_cq=True, fair_weight=spec.fair_weight)
        self.spec = spec
        # As in Kueue, a ClusterQueue naming a ResourceFlavor that does not exist is inactive:
        # its workloads wait, and no cycle pops its heads.
        self.flavors_found = flavors_found
        self.workloads: dict[str, WorkloadInfo] = {}
        self.group_of: dict[str, ResourceGroup] = {}
        for group in spec.resource_groups:
            for resource in group.covered_resources:
                self.group_of[resource] = group
            for fq in group.flavors:
                for rq in fq.resources:
                    self.quotas[(fq.name, rq.name)] = rq

    @property
    def active(self) -> bool:
        return self.spec.stop_policy == "None" and self.flavors_found


class Cache:
    def __init__(self, objects: KueueObjects) -> None:
        self.objects = objects
        self.cluster_queues: dict[str, ClusterQueueNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self._build(objects)

    def _cohort(self, name: str) -> QuotaNode:
        node = self.cohorts.get(name)
        if node is None:
            # A name referenced but not defined is an implicit Cohort without quota of its own.
            spec = self.objects.cohorts.get(name)
            node = QuotaNode(name, is_cq=False, fair_weight=spec.fair_weight if spec is not None else 1.0)
            self.cohorts[name] = node
            if spec is not None:
                for group in spec.resource_groups:
                    for fq in group.flavors:
                        for rq in fq.resources:
                            node.quotas[(fq.name, rq.name)] = rq
                if spec.parent is not None:
                    parent = self._cohort(spec.parent)
                    node.parent = parent
                    parent.child_cohorts.append(node)
        return node

    def _build(self, objects: KueueObjects) -> None:
        for name in sorted(objects.cohorts):
            self._cohort(name)
        for name in sorted(objects.cluster_queues):
            spec = objects.cluster_queues[name]
            found = all(fq.name in objects.flavors for g in spec.resource_groups for fq in g.flavors)
            cq = ClusterQueueNode(spec, flavors_found=found)
            self.cluster_queues[name] = cq
            if spec.cohort is not None:
                parent = self._cohort(spec.cohort)
                cq.parent = parent
                parent.child_cqs.append(cq)
        for node in list(self.cohorts.values()):
            if node.parent is None:
                _update_subtree(node)
        for cq in self.cluster_queues.values():
            if cq.parent is None:
                cq.subtree_quota = {fr: q.nominal for fr, q in cq.quotas.items()}

    def add_workload(self, info: WorkloadInfo) -> None:
        cq = self.cluster_queues[info.cluster_queue]
        cq.workloads[info.name] = info
        for fr, value in info.usage.items():
            add_usage(cq, fr, value)

    def remove_workload(self, info: WorkloadInfo) -> None:
        cq = self.cluster_queues[info.cluster_queue]
        if cq.workloads.pop(info.name, None) is None:
            return
        for fr, value in info.usage.items():
            remove_usage(cq, fr, value)

    def admitted(self) -> Iterable[WorkloadInfo]:
        for cq in self.cluster_queues.values():
            yield from cq.workloads.values()

    def snapshot(self) -> Snapshot:
        return Snapshot(self)


def _update_subtree(cohort: QuotaNode) -> None:
    cohort.subtree_quota = {fr: q.nominal for fr, q in cohort.quotas.items()}
    cohort.usage = {}
    for child in cohort.child_cohorts:
        _update_subtree(child)
        _accumulate(cohort, child)
    for child in cohort.child_cqs:
        child.subtree_quota = {fr: q.nominal for fr, q in child.quotas.items()}
        _accumulate(cohort, child)


def _accumulate(parent: QuotaNode, child: QuotaNode) -> None:
    for fr, quota in child.subtree_quota.items():
        parent.subtree_quota[fr] = parent.subtree_quota.get(fr, 0) + quota - guaranteed_quota(child, fr)
    for fr, used in child.usage.items():
        parent.usage[fr] = parent.usage.get(fr, 0) + max(0, used - guaranteed_quota(child, fr))


class Snapshot:
    """The cache seen by one cycle; every change is journaled and undone by :meth:`rollback`."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.cluster_queues = cache.cluster_queues
        self.journal: Journal = []

    def add_usage(self, cq: QuotaNode, usage: dict[FlavorResource, int]) -> None:
        for fr, value in usage.items():
            add_usage(cq, fr, value, self.journal)

    def remove_usage(self, cq: QuotaNode, usage: dict[FlavorResource, int]) -> None:
        for fr, value in usage.items():
            remove_usage(cq, fr, value, self.journal)

    def remove_workload(self, info: WorkloadInfo) -> None:
        cq = self.cluster_queues[info.cluster_queue]
        if info.name not in cq.workloads:
            return
        self.journal.append((cq.workloads, info.name, info))
        del cq.workloads[info.name]
        self.remove_usage(cq, info.usage)

    def add_workload(self, info: WorkloadInfo) -> None:
        cq = self.cluster_queues[info.cluster_queue]
        if info.name in cq.workloads:
            return
        self.journal.append((cq.workloads, info.name, None))
        cq.workloads[info.name] = info
        self.add_usage(cq, info.usage)

    def mark(self) -> int:
        return len(self.journal)

    def rollback(self, mark: int = 0) -> None:
        journal = self.journal
        while len(journal) > mark:
            mapping, key, old = journal.pop()
            if old is None:
                mapping.pop(key, None)
            else:
                mapping[key] = old
