"""All pending queues, keyed by ClusterQueue, and the moves between them."""

from __future__ import annotations

from agent_fleet.admission.cache.cache import Cache
from agent_fleet.admission.objects import BEST_EFFORT_FIFO
from agent_fleet.admission.queue.cluster_queue import PendingQueue, RequeueReason
from agent_fleet.admission.workload import WorkloadInfo

__all__ = ["QueueManager"]


class QueueManager:
    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.queues: dict[str, PendingQueue] = {}
        self.rebuild(cache)

    def rebuild(self, cache: Cache) -> None:
        """Follow a new configuration: strategies may change; queues keep their workloads."""
        self.cache = cache
        for name in sorted(cache.cluster_queues):
            strategy = cache.cluster_queues[name].spec.queueing_strategy
            queue = self.queues.get(name)
            if queue is None:
                self.queues[name] = PendingQueue(name, strategy)
            else:
                queue.strategy = strategy

    def queue(self, cluster_queue: str) -> PendingQueue:
        queue = self.queues.get(cluster_queue)
        if queue is None:
            # A LocalQueue may point at a ClusterQueue that does not exist (yet): its
            # workloads wait, inadmissible, in a queue no cycle pops.
            queue = self.queues[cluster_queue] = PendingQueue(cluster_queue, BEST_EFFORT_FIFO)
        return queue

    def add(self, info: WorkloadInfo) -> None:
        if info.cluster_queue in self.cache.cluster_queues:
            self.queue(info.cluster_queue).add(info)
        else:
            self.queue(info.cluster_queue).park(info)

    def delete(self, info: WorkloadInfo) -> bool:
        queue = self.queues.get(info.cluster_queue)
        return queue is not None and queue.delete(info.name) is not None

    def heads(self) -> list[WorkloadInfo]:
        """Step 1 of a cycle: pop one head from every active ClusterQueue."""
        heads = []
        cqs = self.cache.cluster_queues
        for name, queue in self.queues.items():
            if not queue.active_count:
                continue
            cq = cqs.get(name)
            if cq is None or not cq.active:
                continue
            head = queue.pop()
            if head is not None:
                heads.append(head)
        return heads

    def requeue(self, info: WorkloadInfo, reason: RequeueReason, wait_reason: str = "") -> bool:
        return self.queue(info.cluster_queue).requeue(info, reason, wait_reason)

    def queue_inadmissible_near(self, cluster_queue: str) -> bool:
        """Quota was freed in this ClusterQueue: every parked workload of its cohort tree retries."""
        cq = self.cache.cluster_queues.get(cluster_queue)
        if cq is None:
            return False
        names = [c.name for c in cq.root().subtree_cluster_queues()] if cq.parent is not None else [cq.name]
        moved = False
        for name in names:
            queue = self.queues.get(name)
            if queue is not None and queue.queue_inadmissible():
                moved = True
        return moved

    def queue_all_inadmissible(self) -> bool:
        moved = False
        for name, queue in self.queues.items():
            if name in self.cache.cluster_queues and queue.queue_inadmissible():
                moved = True
        return moved

    def counts(self, cluster_queue: str) -> tuple[int, int]:
        queue = self.queues.get(cluster_queue)
        if queue is None:
            return 0, 0
        return queue.active_count, queue.inadmissible_count
