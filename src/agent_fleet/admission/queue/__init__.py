"""What waits: one ordered pending queue per ClusterQueue, with its inadmissible set."""

from agent_fleet.admission.queue.cluster_queue import PendingQueue, RequeueReason
from agent_fleet.admission.queue.manager import QueueManager

__all__ = ["PendingQueue", "QueueManager", "RequeueReason"]
