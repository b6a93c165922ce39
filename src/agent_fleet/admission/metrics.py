"""Kueue's metrics, under Kueue's names, in a registry of our own (never the global one).

Counters and histograms move as decisions are made; gauges (pending, admitted, usage,
quota) are refreshed from the controller's state when they are read, so a cycle never
pays for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from agent_fleet.admission.controller import AdmissionController

__all__ = ["AdmissionMetrics"]

_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 10800)


class AdmissionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.pending = Gauge(
            "kueue_pending_workloads",
            "Pending workloads per ClusterQueue and status",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.admitted_active = Gauge(
            "kueue_admitted_active_workloads", "Admitted workloads that are running", ["cluster_queue"], registry=r
        )
        self.reserving_active = Gauge(
            "kueue_reserving_active_workloads", "Workloads holding quota", ["cluster_queue"], registry=r
        )
        self.admitted_total = Counter("kueue_admitted_workloads", "Admitted workloads", ["cluster_queue"], registry=r)
        self.quota_reserved_total = Counter(
            "kueue_quota_reserved_workloads", "Workloads that reserved quota", ["cluster_queue"], registry=r
        )
        self.admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from queueing to admission",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.quota_reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from queueing to quota reservation",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.preempted_total = Counter(
            "kueue_preempted_workloads", "Workloads preempted", ["preempting_cluster_queue", "reason"], registry=r
        )
        self.evicted_total = Counter(
            "kueue_evicted_workloads", "Workloads evicted", ["cluster_queue", "reason"], registry=r
        )
        self.attempts_total = Counter("kueue_admission_attempts", "Scheduling cycles by result", ["result"], registry=r)
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds", "CPU time of a scheduling cycle", ["result"], registry=r
        )
        self.usage = Gauge(
            "kueue_cluster_queue_resource_usage", "Quota in use", ["cluster_queue", "flavor", "resource"], registry=r
        )
        self.nominal = Gauge(
            "kueue_cluster_queue_nominal_quota", "Nominal quota", ["cluster_queue", "flavor", "resource"], registry=r
        )
        self.borrowing_limit = Gauge(
            "kueue_cluster_queue_borrowing_limit",
            "Borrowing limit",
            ["cluster_queue", "flavor", "resource"],
            registry=r,
        )
        self.lending_limit = Gauge(
            "kueue_cluster_queue_lending_limit", "Lending limit", ["cluster_queue", "flavor", "resource"], registry=r
        )

        # labelled children, looked up once: a cycle records into them without the registry's lock
        self._attempts: dict[str, tuple[Counter, Histogram]] = {}
        self._admissions: dict[str, tuple[Counter, Counter, Histogram, Histogram]] = {}

    def record_attempt(self, result: str, cpu_seconds: float) -> None:
        """One scheduling cycle that looked at heads, by its result."""
        children = self._attempts.get(result)
        if children is None:
            children = self._attempts[result] = (
                self.attempts_total.labels(result),
                self.attempt_duration.labels(result),
            )
        children[0].inc()
        children[1].observe(cpu_seconds)

    def record_admission(self, cluster_queue: str, wait: float) -> None:
        """One workload admitted (and its quota reserved) after ``wait`` seconds in its queue."""
        children = self._admissions.get(cluster_queue)
        if children is None:
            children = self._admissions[cluster_queue] = (
                self.admitted_total.labels(cluster_queue),
                self.quota_reserved_total.labels(cluster_queue),
                self.admission_wait.labels(cluster_queue),
                self.quota_reserved_wait.labels(cluster_queue),
            )
        admitted, reserved, admission_wait, reserved_wait = children
        admitted.inc()
        reserved.inc()
        admission_wait.observe(wait)
        reserved_wait.observe(wait)

    def refresh(self, controller: AdmissionController) -> None:
        """Set every gauge from the controller's current state."""
        for row in controller.snapshot()["cluster_queues"]:
            name = row["name"]
            self.pending.labels(name, "active").set(row["pending_active"])
            self.pending.labels(name, "inadmissible").set(row["pending_inadmissible"])
            self.admitted_active.labels(name).set(row["admitted"])
            self.reserving_active.labels(name).set(row["admitted"])
            for res in row["resources"]:
                labels = (name, res["flavor"], res["resource"])
                self.usage.labels(*labels).set(res["usage_count"])
                self.nominal.labels(*labels).set(res["nominal_count"])
                if res["borrowing_limit_count"] is not None:
                    self.borrowing_limit.labels(*labels).set(res["borrowing_limit_count"])
                if res["lending_limit_count"] is not None:
                    self.lending_limit.labels(*labels).set(res["lending_limit_count"])

    def exposition(self, controller: AdmissionController) -> bytes:
        self.refresh(controller)
        return bytes(generate_latest(self.registry))
