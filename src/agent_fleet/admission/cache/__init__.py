"""What holds quota: the ClusterQueue/Cohort tree and admitted usage."""

from agent_fleet.admission.cache.cache import Cache, ClusterQueueNode, Snapshot
from agent_fleet.admission.cache.resource_node import QuotaNode

__all__ = ["Cache", "ClusterQueueNode", "QuotaNode", "Snapshot"]
