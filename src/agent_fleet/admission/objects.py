"""Kueue objects as the admission controller reads them.

Only what decides admission is kept: quotas are integer counts (see :mod:`quantity`),
policies are the exact Kueue spellings. Instances are immutable; a configuration
change builds a new :class:`KueueObjects`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "BEST_EFFORT_FIFO",
    "STRICT_FIFO",
    "FAIR_SHARING_STRATEGIES",
    "LESS_THAN_INITIAL_SHARE",
    "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE",
    "ClusterQueue",
    "Cohort",
    "FairSharing",
    "FlavorFungibility",
    "FlavorQuotas",
    "KueueObjects",
    "LabelSelector",
    "LocalQueue",
    "Namespace",
    "Preemption",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "WorkloadPriorityClass",
]

STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"

# Kueue's fair-sharing preemption strategies (KEP-1714 rules S2-a and S2-b).
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
# The orders Kueue's configuration validation accepts; an empty list means the last one.
FAIR_SHARING_STRATEGIES = (
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (LESS_THAN_INITIAL_SHARE,),
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceQuota:
    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    """``spec.preemption`` with Kueue's defaults (every policy ``Never``)."""

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlavorFungibility:
    """``spec.flavorFungibility``; ``Borrow``/``Preempt`` (v1beta1) read as ``MayStopSearch``."""

    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FairSharing:
    """Kueue's manager-level ``fairSharing`` setting: when enabled, heads are ordered by dominant
    resource share and preemption in a cohort follows the share-based strategies."""

    enable: bool = False
    preemption_strategies: tuple[str, ...] = FAIR_SHARING_STRATEGIES[2]
    # Kueue's feature gates that shape fair sharing, with Kueue's defaults (beta, on since 0.17):
    # a preemptor that stays within its nominal quota reclaims from borrowers without consulting
    # the strategies (InCohortReclamation); the tournament puts heads whose subtree does not
    # borrow on the flavors they request before the others.
    preempt_within_nominal: bool = True
    prioritize_non_borrowing: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.match_expressions:
            present = key in labels
            if op == "In" and not (present and labels[key] in values):
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceFlavor:
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    queueing_strategy: str = BEST_EFFORT_FIFO
    preemption: Preemption = field(default_factory=Preemption)
    # None selects no namespace (Kueue's null selector); an empty selector selects all.
    namespace_selector: LabelSelector | None = field(default_factory=LabelSelector)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    stop_policy: str = "None"
    fair_weight: float = 1.0  # spec.fairSharing.weight

    def quota_of(self, flavor: str, resource: str) -> ResourceQuota | None:
        for group in self.resource_groups:
            for fq in group.flavors:
                if fq.name == flavor:
                    for rq in fq.resources:
                        if rq.name == resource:
                            return rq
        return None

    def covers(self, resource: str) -> bool:
        return any(resource in g.covered_resources for g in self.resource_groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0  # spec.fairSharing.weight


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def label_map(self) -> dict[str, str]:
        labels = dict(self.labels)
        labels.setdefault("kubernetes.io/metadata.name", self.name)
        return labels


@dataclass(frozen=True, slots=True, kw_only=True)
class KueueObjects:
    """A whole admission configuration; maps are keyed by name (LocalQueues by ``ns/name``)."""

    flavors: Mapping[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    local_queues: Mapping[str, LocalQueue] = field(default_factory=dict)
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    priority_classes: Mapping[str, WorkloadPriorityClass] = field(default_factory=dict)
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    # From a Kueue ``Configuration`` object among the objects; None when there is none.
    fair_sharing: FairSharing | None = None
    warnings: tuple[str, ...] = ()

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.namespaces.get(namespace) or Namespace(name=namespace)
        return ns.label_map()

    def resolve_local_queue(self, queue: str) -> LocalQueue | None:
        """``ns/name``, or a bare ``name`` in namespace ``default``."""
        key = queue if "/" in queue else f"default/{queue}"
        return self.local_queues.get(key)
