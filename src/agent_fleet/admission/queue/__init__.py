"""What waits: one ordered pending queue per ClusterQueue, with its inadmissible set."""

from agent_fleet.admission.queue.cluster_queue import (
    FAILED_AFTER_NOMINATION,
    GENERIC,
    NAMESPACE_MISMATCH,
    NO_FIT,
    PENDING_PREEMPTION,
    PREEMPTION_NO_CANDIDATES,
    PendingQueue,
)
from agent_fleet.admission.queue.manager import QueueManager

__all__ = [
    "FAILED_AFTER_NOMINATION",
    "GENERIC",
    "NAMESPACE_MISMATCH",
    "NO_FIT",
    "PENDING_PREEMPTION",
    "PREEMPTION_NO_CANDIDATES",
    "PendingQueue",
    "QueueManager",
]
