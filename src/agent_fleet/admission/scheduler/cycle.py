"""One scheduling cycle, as numbered steps (Kueue's ``Scheduler.schedule``).

1. Pop one head per active ClusterQueue.
2. Open a snapshot of the cache (changes are journaled and undone in step 6).
3. Nominate: check the namespace, assign flavors, and find preemption targets when the
   head needs them.
4. Order the entries: no borrowing first, then priority, then age; under fair sharing, a
   tournament on dominant resource shares picks each next entry (:mod:`.fair_order`).
5. Process each entry against the usage already assumed in this cycle: admit it, issue
   its preemptions, reserve capacity for it, or skip it.
6. Roll the snapshot back and commit: admitted workloads enter the cache.
7. Requeue the heads that were not admitted (active or inadmissible, per Kueue's rules).
8. Evict the victims: they leave the cache, go back to their queues, and the parked
   workloads of their cohort trees retry.

The cycle never sleeps and never reads a clock other than the injected one; it returns
whether to keep going (something was admitted) and whether the state moved at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.admission.cache.cache import Cache, ClusterQueueNode, Snapshot
from agent_fleet.admission.cache.resource_node import available
from agent_fleet.admission.objects import FairSharing, KueueObjects
from agent_fleet.admission.queue import QueueManager, RequeueReason
from agent_fleet.admission.scheduler import flavor_assigner as fa
from agent_fleet.admission.scheduler.fair_order import fair_order
from agent_fleet.admission.scheduler.fair_preemption import get_fair_targets
from agent_fleet.admission.scheduler.ordering import entry_order
from agent_fleet.admission.scheduler.preemption import Target, get_targets
from agent_fleet.admission.workload import FlavorResource, WorkloadInfo
from agent_fleet.clock import Clock

__all__ = ["Admitted", "CycleResult", "Preempted", "Requeued", "Scheduler"]

# Reasons a pending workload reports (Kueue's QuotaReserved condition reasons).
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
MISCONFIGURED = "Misconfigured"
INACTIVE = "Inactive"


@dataclass(frozen=True, slots=True)
class Admitted:
    workload: WorkloadInfo
    cluster_queue: str
    flavors: dict[str, str]
    borrowing: bool


@dataclass(frozen=True, slots=True)
class Preempted:
    victim: WorkloadInfo
    by: WorkloadInfo
    reason: str


@dataclass(frozen=True, slots=True)
class Requeued:
    workload: WorkloadInfo
    reason: str  # why it waits, in Kueue's words
    message: str
    inadmissible: bool  # parked until quota is freed (BestEffortFIFO)


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleResult:
    admitted: tuple[Admitted, ...] = ()
    preempted: tuple[Preempted, ...] = ()
    requeued: tuple[Requeued, ...] = ()
    heads: int = 0
    # Kueue's signal to its backoff runner: keep going after a success, slow down otherwise.
    keep_going: bool = False
    # The state moved; a cycle right away may decide differently. False means a fixed point.
    progressed: bool = False


@dataclass(slots=True)
class _Entry:
    info: WorkloadInfo
    cq: ClusterQueueNode
    assignment: fa.Assignment
    targets: list[Target] = field(default_factory=list)
    requeue_reason: RequeueReason = RequeueReason.GENERIC
    wait_reason: str = ""
    nominated: bool = False
    admitted: bool = False


class Scheduler:
    def __init__(
        self, cache: Cache, queues: QueueManager, clock: Clock, *, fair_sharing: FairSharing | None = None
    ) -> None:
        self.cache = cache
        self.queues = queues
        self.clock = clock
        self.cycles = 0
        self.fair_sharing = fair_sharing if fair_sharing is not None and fair_sharing.enable else None

    def schedule(self) -> CycleResult:
        self.cycles += 1
        # 1. Heads.
        heads = self.queues.heads()
        if not heads:
            return CycleResult()
        # 2. Snapshot.
        snapshot = self.cache.snapshot()
        # 3. Nominate.
        entries, inadmissible = self._nominate(heads, snapshot)
        # 4. Order.
        entries.sort(key=lambda e: entry_order(e.assignment.borrowing, e.info))
        fair = self.fair_sharing
        ordered = fair_order(entries, snapshot, fair) if fair is not None else iter(entries)
        # 5. Process.
        admitted: list[Admitted] = []
        preempted: list[Preempted] = []
        victims: dict[str, WorkloadInfo] = {}
        for entry in ordered:
            self._process(entry, snapshot, victims, admitted, preempted)
        # 6. Roll back and commit.
        snapshot.rollback()
        now = self.clock.now()
        for adm in admitted:
            info = adm.workload
            info.admitted_at = now
            info.last_reason = ""
            self.cache.add_workload(info)
            self.queues.queue(info.cluster_queue).delete(info.name)
        # 7. Requeue.
        requeued: list[Requeued] = []
        progressed = bool(admitted or preempted)
        for entry in [*entries, *inadmissible]:
            if entry.admitted:
                continue
            info = entry.info
            reason = entry.requeue_reason
            if entry.nominated and reason == RequeueReason.GENERIC:
                reason = RequeueReason.FAILED_AFTER_NOMINATION
            info.last_reason = entry.wait_reason
            parked = self.queues.requeue(info, reason, entry.wait_reason)
            progressed = progressed or parked
            requeued.append(Requeued(info, entry.wait_reason, entry.assignment.message(), parked))
        # 8. Evict the victims.
        freed: set[str] = set()
        for victim in victims.values():
            self.cache.remove_workload(victim)
            victim.admitted_at = None
            victim.usage = {}
            victim.queued_at = now
            victim.last_reason = ""
            self.queues.add(victim)
            freed.add(victim.cluster_queue)
        for name in sorted(freed):
            self.queues.queue_inadmissible_near(name)
        return CycleResult(
            admitted=tuple(admitted),
            preempted=tuple(preempted),
            requeued=tuple(requeued),
            heads=len(heads),
            keep_going=bool(admitted),
            progressed=progressed,
        )

    # -- step 3 ---------------------------------------------------------------------------
    def _nominate(self, heads: list[WorkloadInfo], snapshot: Snapshot) -> tuple[list[_Entry], list[_Entry]]:
        objects: KueueObjects = self.cache.objects
        entries: list[_Entry] = []
        inadmissible: list[_Entry] = []
        fair = self.fair_sharing

        def find(
            info: WorkloadInfo,
            cq: ClusterQueueNode,
            requests: dict[FlavorResource, int],
            frs: frozenset[FlavorResource],
        ) -> list[Target]:
            if fair is not None:
                return get_fair_targets(info, cq, requests, frs, snapshot, fair)
            return get_targets(info, cq, requests, frs, snapshot)

        # Targets for the same head and request on an unchanged snapshot are the same: the
        # oracle's answer for a one-resource request is reused for the nomination itself.
        memo: dict[tuple[str, frozenset[tuple[FlavorResource, int]]], list[Target]] = {}

        def targets_for(
            info: WorkloadInfo,
            cq: ClusterQueueNode,
            requests: dict[FlavorResource, int],
            frs: frozenset[FlavorResource],
        ) -> list[Target]:
            key = (info.name, frozenset(requests.items()))
            if frs != frozenset(requests):
                return find(info, cq, requests, frs)
            found = memo.get(key)
            if found is None:
                found = memo[key] = find(info, cq, requests, frs)
            return list(found)

        def oracle(cq: ClusterQueueNode, info: WorkloadInfo, fr: FlavorResource, value: int) -> tuple[int, int]:
            return _simulate_preemption(cq, info, fr, value, snapshot, targets_for)

        for info in heads:
            cq = self.cache.cluster_queues[info.cluster_queue]
            selector = cq.spec.namespace_selector
            if selector is None or not selector.matches(objects.namespace_labels(info.namespace)):
                entry = _Entry(info, cq, fa.Assignment(mode=fa.NO_FIT))
                entry.requeue_reason = RequeueReason.NAMESPACE_MISMATCH
                entry.wait_reason = MISCONFIGURED
                entry.assignment.messages.append(
                    f"namespace {info.namespace!r} is not selected by ClusterQueue {cq.name!r}"
                )
                inadmissible.append(entry)
                continue
            assignment = fa.assign_flavors(cq, info, oracle, fair=fair is not None)
            entry = _Entry(info, cq, assignment)
            if assignment.mode == fa.PREEMPT:
                entry.targets = targets_for(info, cq, assignment.usage, assignment.needs_preemption())
            entries.append(entry)
        return entries, inadmissible

    # -- step 5 ---------------------------------------------------------------------------
    def _process(
        self,
        entry: _Entry,
        snapshot: Snapshot,
        victims: dict[str, WorkloadInfo],
        admitted: list[Admitted],
        preempted: list[Preempted],
    ) -> None:
        assignment = entry.assignment
        cq = entry.cq
        if assignment.mode == fa.NO_FIT:
            entry.requeue_reason = RequeueReason.NO_FIT
            entry.wait_reason = assignment.reason or fa.WAITING_FOR_QUOTA
            return
        if assignment.mode == fa.PREEMPT and not entry.targets:
            entry.requeue_reason = RequeueReason.PREEMPTION_NO_CANDIDATES
            entry.wait_reason = fa.WAITING_FOR_QUOTA
            if cq.spec.preemption.reclaim_within_cohort != "Any":
                # Unsure we could reclaim it later: hold the capacity so that lower-priority
                # workloads elsewhere in the cohort cannot take it first.
                snapshot.add_usage(cq, _to_reserve(entry))
            return
        entry.nominated = True
        if any(t.victim.name in victims for t in entry.targets):
            entry.wait_reason = fa.WAITING_FOR_QUOTA
            return
        if not _fits(snapshot, cq, assignment.usage, [*victims.values(), *(t.victim for t in entry.targets)]):
            entry.wait_reason = fa.WAITING_FOR_QUOTA
            return
        snapshot.add_usage(cq, assignment.usage)
        if assignment.mode == fa.PREEMPT:
            for target in entry.targets:
                victims[target.victim.name] = target.victim
                preempted.append(Preempted(target.victim, entry.info, target.reason))
            entry.requeue_reason = RequeueReason.PENDING_PREEMPTION
            entry.wait_reason = WAITING_FOR_PREEMPTED
            return
        entry.admitted = True
        entry.info.usage = dict(assignment.usage)
        admitted.append(Admitted(entry.info, cq.name, dict(assignment.flavors), assignment.borrowing > 0))


def _fits(
    snapshot: Snapshot, cq: ClusterQueueNode, usage: dict[FlavorResource, int], removed: list[WorkloadInfo]
) -> bool:
    mark = snapshot.mark()
    for info in removed:
        snapshot.remove_workload(info)
    ok = all(value <= max(0, available(cq, fr)) for fr, value in usage.items())
    snapshot.rollback(mark)
    return ok


def _to_reserve(entry: _Entry) -> dict[FlavorResource, int]:
    cq = entry.cq
    reserved: dict[FlavorResource, int] = {}
    for fr, value in entry.assignment.usage.items():
        quota = cq.quotas.get(fr)
        nominal = quota.nominal if quota is not None else 0
        used = cq.usage.get(fr, 0)
        if entry.assignment.borrowing > 0:
            if quota is None or quota.borrowing_limit is None:
                reserved[fr] = value
            else:
                reserved[fr] = max(0, min(value, nominal + quota.borrowing_limit - used))
        else:
            reserved[fr] = max(0, min(value, nominal - used))
    return reserved


def _simulate_preemption(
    cq: ClusterQueueNode,
    info: WorkloadInfo,
    fr: FlavorResource,
    value: int,
    snapshot: Snapshot,
    targets_for: Callable[
        [WorkloadInfo, ClusterQueueNode, dict[FlavorResource, int], frozenset[FlavorResource]], list[Target]
    ],
) -> tuple[int, int]:
    """Kueue's preemption oracle: could preemption make ``value`` of ``fr`` fit, and how far
    up the cohort tree would the rest be borrowed."""
    targets = targets_for(info, cq, {fr: value}, frozenset({fr}))
    if not targets:
        return fa.G_NO_CANDIDATES, fa.lowest_subtree_that_fits(cq, fr, value)[0]
    mark = snapshot.mark()
    for target in targets:
        snapshot.remove_workload(target.victim)
    borrow = fa.lowest_subtree_that_fits(cq, fr, value)[0]
    snapshot.rollback(mark)
    if any(t.victim.cluster_queue == cq.name for t in targets):
        return fa.G_PREEMPT, borrow
    return fa.G_RECLAIM, borrow
