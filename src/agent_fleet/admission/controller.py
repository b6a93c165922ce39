"""The in-process admission controller the engine's dispatcher talks to.

``AdmissionController(objects, clock)`` owns the two caches (what waits, what holds quota)
and the scheduler. The dispatcher ``submit``\\ s one :class:`Workload` per agent session,
``finish``\\ es it when the session ends, and either calls :meth:`run_cycle` itself or runs
:meth:`run` in its TaskGroup, which cycles whenever something changed and invokes

* ``on_admit(workload)`` — the session may start;
* ``on_preempt(workload, reason, by)`` — the session must pause; the workload is already
  back in its queue (as Kueue requeues evicted workloads) and ``on_admit`` fires again when
  it is readmitted, so the session resumes from its log.

Decisions read time only from the injected clock. ``agent-fleet queues simulate`` drives
this very class on a :class:`~agent_fleet.clock.VirtualClock`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from agent_fleet.admission.cache.cache import Cache
from agent_fleet.admission.cache.resource_node import potential_available
from agent_fleet.admission.kueue_metrics import AdmissionMetrics
from agent_fleet.admission.objects import FairSharing, KueueObjects
from agent_fleet.admission.quantity import format_quantity, parse_quantity
from agent_fleet.admission.queue import QueueManager
from agent_fleet.admission.scheduler import CycleResult, Scheduler
from agent_fleet.admission.scheduler.flavor_assigner import EXCEEDS_MAX_QUOTA, NO_MATCHING_FLAVOR
from agent_fleet.admission.workload import Workload, WorkloadInfo
from agent_fleet.clock import Clock
from agent_fleet.errors import ConfigError

__all__ = ["AdmissionController", "OnAdmit", "OnPreempt"]

OnAdmit = Callable[[Workload], None]
OnPreempt = Callable[[Workload, str, Workload], None]

_CYCLES_PER_TURN = 256

# A fixed point is reached long before this; the cap only guards against a policy loop.
_MAX_CYCLES_PER_SETTLE = 100_000


class AdmissionController:
    def __init__(
        self,
        objects: KueueObjects,
        clock: Clock,
        *,
        on_admit: OnAdmit | None = None,
        on_preempt: OnPreempt | None = None,
        with_metrics: bool = True,
        fair_sharing: FairSharing | None = None,
    ) -> None:
        self.objects = objects
        self.clock = clock
        self.on_admit = on_admit
        self.on_preempt = on_preempt
        self.metrics = AdmissionMetrics() if with_metrics else None
        self.cache = Cache(objects)
        self.queues = QueueManager(self.cache)
        # An explicit setting wins over a Kueue Configuration among the objects.
        self.fair_sharing = fair_sharing if fair_sharing is not None else objects.fair_sharing
        self.scheduler = Scheduler(self.cache, self.queues, clock, fair_sharing=self.fair_sharing)
        self.workloads: dict[str, WorkloadInfo] = {}
        self._wake = asyncio.Event()
        # Who these metrics are of: runs that share one controller store copies of one set of counters.
        self.uid = uuid.uuid4().hex

    # -- inputs ---------------------------------------------------------------------------
    def submit(self, workload: Workload) -> str | None:
        """Queue a workload. Returns ``None``, or why it can never be admitted under the
        current quotas (``ExceedsMaxQuota`` / ``NoMatchingFlavor``): it still waits, as in
        Kueue, but the caller may refuse the session at once. Raises ConfigError for an
        unknown queue or priority class, a duplicate name, or a malformed request."""
        if workload.name in self.workloads:
            raise ConfigError(f"workload {workload.name!r}: name: already submitted")
        info = self._info(workload)
        self.workloads[workload.name] = info
        self.queues.add(info)
        if info.cluster_queue not in self.cache.cluster_queues:
            info.last_reason = "ClusterQueueNotFound"
        self._wake.set()
        return self._never_fits(info)

    def check(self, workload: Workload) -> str | None:
        """What :meth:`submit` would say of ``workload`` (ConfigError, or why it can never be
        admitted), with nothing queued: a run's sessions are checked before the run is recorded."""
        return self._never_fits(self._info(workload))

    def _info(self, workload: Workload) -> WorkloadInfo:
        lq = self.objects.resolve_local_queue(workload.queue)
        if lq is None:
            raise ConfigError(f"workload {workload.name!r}: queue: no LocalQueue {workload.queue!r}")
        spec = self.objects.cluster_queues.get(lq.cluster_queue)
        info = WorkloadInfo(
            workload=workload,
            namespace=lq.namespace,
            local_queue=lq.key,
            cluster_queue=lq.cluster_queue,
            priority=self._priority(workload),
            requests=self._requests(workload, covers=spec.covers if spec is not None else None),
            pods=1,
            now=self.clock.now(),
        )
        info.pods = info.requests.get("pods", 1)
        return info

    def finish(self, name: str) -> bool:
        """The session ended (or was cancelled): release its quota or drop it from its queue."""
        info = self.workloads.pop(name, None)
        if info is None:
            return False
        if info.admitted_at is not None:
            self.cache.remove_workload(info)
            self.queues.queue_inadmissible_near(info.cluster_queue)
        else:
            self.queues.delete(info)
        self._wake.set()
        return True

    def update_objects(self, objects: KueueObjects) -> None:
        """Apply a new configuration: admitted workloads keep running, every parked workload retries."""
        admitted = [w for w in self.workloads.values() if w.admitted_at is not None]
        self.objects = objects
        self.cache = Cache(objects)
        for info in admitted:
            if info.cluster_queue in self.cache.cluster_queues:
                self.cache.add_workload(info)
        self.queues.rebuild(self.cache)
        self.scheduler.cache = self.cache
        if objects.fair_sharing is not None:
            self.fair_sharing = objects.fair_sharing
            self.scheduler.fair_sharing = objects.fair_sharing if objects.fair_sharing.enable else None
        self.queues.queue_all_inadmissible()
        self._wake.set()

    # -- the loop -------------------------------------------------------------------------
    def run_cycle(self) -> CycleResult:
        """One scheduling cycle; callbacks fire for its decisions before it returns."""
        started = time.process_time()  # measures our own CPU work for the metric; never decides
        result = self.scheduler.schedule()
        if self.metrics is not None and result.heads:
            outcome = "success" if result.keep_going else "inadmissible"
            self.metrics.record_attempt(outcome, time.process_time() - started)
        now = self.clock.now()
        for victim in result.preempted:
            if self.metrics is not None:
                self.metrics.preempted_total.labels(victim.by.cluster_queue, victim.reason).inc()
                self.metrics.evicted_total.labels(victim.victim.cluster_queue, "Preempted").inc()
            if self.on_preempt is not None:
                self.on_preempt(victim.victim.workload, victim.reason, victim.by.workload)
        for adm in result.admitted:
            info = adm.workload
            if self.metrics is not None:
                self.metrics.record_admission(adm.cluster_queue, max(0.0, now - info.queued_at))
            if self.on_admit is not None:
                self.on_admit(info.workload)
        return result

    def settle(self) -> list[CycleResult]:
        """Cycle until a fixed point: no cycle right now could decide anything new."""
        results = []
        for _ in range(_MAX_CYCLES_PER_SETTLE):
            result = self.run_cycle()
            results.append(result)
            if not result.progressed:
                break
        return results

    async def run(self, stop_event: asyncio.Event) -> None:
        """Cycle while cycles make progress; otherwise wait for a submit, a finish, a new
        configuration or ``stop_event``. Runs in the caller's TaskGroup."""
        while not stop_event.is_set():
            self._wake.clear()
            # Cycles stay one at a time, in order; up to a batch of progressing cycles runs before the
            # loop yields, so a burst of submissions is admitted in one turn of the event loop rather
            # than one admission per turn behind every other ready task.
            for _ in range(_CYCLES_PER_TURN):
                result = self.run_cycle()
                if not result.progressed:
                    break
            if result.progressed:
                await asyncio.sleep(0)
                continue
            await _first_of(self._wake, stop_event)

    # -- reading --------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """JSON-able state for ``agent-fleet queues``: per ClusterQueue admitted, pending, usage vs quota."""
        rows = []
        for name in sorted(self.objects.cluster_queues):
            spec = self.objects.cluster_queues[name]
            node = self.cache.cluster_queues[name]
            active, inadmissible = self.queues.counts(name)
            resources = []
            for group in spec.resource_groups:
                for fq in group.flavors:
                    for rq in fq.resources:
                        used = node.usage.get((fq.name, rq.name), 0)
                        resources.append(
                            _resource_row(fq.name, rq.name, used, rq.nominal, rq.borrowing_limit, rq.lending_limit)
                        )
            rows.append(
                {
                    "name": name,
                    "cohort": spec.cohort,
                    "queueing_strategy": spec.queueing_strategy,
                    "admitted": len(node.workloads),
                    "pending_active": active,
                    "pending_inadmissible": inadmissible,
                    "resources": resources,
                }
            )
        return {"time": self.clock.now(), "cluster_queues": rows}

    def metrics_text(self) -> bytes:
        """Prometheus text exposition of this controller's registry."""
        if self.metrics is None:
            return b""
        return self.metrics.exposition(self)

    def pending(self) -> tuple[list[str], list[str]]:
        """Names of pending workloads: (active, inadmissible), each sorted."""
        active: list[str] = []
        inadmissible: list[str] = []
        for queue in self.queues.queues.values():
            active.extend(info.name for info in queue.active())
            inadmissible.extend(info.name for info in queue.inadmissible())
        return sorted(active), sorted(inadmissible)

    def admitted(self) -> list[str]:
        return sorted(info.name for info in self.cache.admitted())

    # -- helpers --------------------------------------------------------------------------
    def _priority(self, workload: Workload) -> int:
        if workload.priority_class is not None:
            wpc = self.objects.priority_classes.get(workload.priority_class)
            if wpc is None:
                raise ConfigError(
                    f"workload {workload.name!r}: priorityClass: no WorkloadPriorityClass {workload.priority_class!r}"
                )
            if workload.priority is not None and workload.priority != wpc.value:
                raise ConfigError(f"workload {workload.name!r}: priority: disagrees with priorityClass")
            return wpc.value
        return workload.priority if workload.priority is not None else 0

    def _requests(self, workload: Workload, *, covers: Callable[[str], bool] | None) -> dict[str, int]:
        """The workload's requests as counts: ``requests``, and ``defaults`` the ClusterQueue covers."""
        requests: dict[str, int] = {}
        defaults = {r: v for r, v in workload.defaults.items() if covers is not None and covers(str(r))}
        for resource, value in {**defaults, **workload.requests}.items():
            try:
                count = parse_quantity(str(resource), value)
            except ValueError as exc:
                raise ConfigError(f"workload {workload.name!r}: requests.{resource}: {exc}") from None
            if count < 0:
                raise ConfigError(f"workload {workload.name!r}: requests.{resource}: must be non-negative")
            requests[str(resource)] = count
        return requests

    def _never_fits(self, info: WorkloadInfo) -> str | None:
        cq = self.cache.cluster_queues.get(info.cluster_queue)
        if cq is None:
            return None
        requests = {r: v for r, v in info.requests.items() if r != "pods"}
        if "pods" in cq.group_of:
            requests["pods"] = info.pods
        for resource, value in requests.items():
            group = cq.group_of.get(resource)
            if group is None:
                if value:
                    return NO_MATCHING_FLAVOR
                continue
            if all(value > potential_available(cq, (fq.name, resource)) for fq in group.flavors):
                return EXCEEDS_MAX_QUOTA
        return None


def _resource_row(
    flavor: str, resource: str, used: int, nominal: int, borrowing: int | None, lending: int | None
) -> dict[str, Any]:
    def fmt(v: int | None) -> str | None:
        return None if v is None else format_quantity(resource, v)

    scale = 1000 if resource == "cpu" else 1
    return {
        "flavor": flavor,
        "resource": resource,
        "usage": fmt(used),
        "nominal_quota": fmt(nominal),
        "borrowing_limit": fmt(borrowing),
        "lending_limit": fmt(lending),
        "usage_count": used / scale,
        "nominal_count": nominal / scale,
        "borrowing_limit_count": None if borrowing is None else borrowing / scale,
        "lending_limit_count": None if lending is None else lending / scale,
    }


async def _first_of(*events: asyncio.Event) -> None:
    """Wait until any event is set; the waiters never outlive this call."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
