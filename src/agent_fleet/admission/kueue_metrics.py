"""Kueue's metrics, under Kueue's names, in a registry of our own (never the global one).

A cycle notes its decisions; counters and histograms take them in when the metrics are
read (or every few thousand notes), and gauges (pending, admitted, usage, quota) are set
from the controller's state at that moment, so a cycle pays for neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from agent_fleet.admission.controller import AdmissionController

__all__ = ["AdmissionMetrics"]

_FLUSH_EVERY = 4096  # notes kept before they are moved into the metrics unread
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

        # Cycles only note what they decided; the notes go into the metrics when the metrics are
        # read, or every _FLUSH_EVERY notes.
        self._attempted: list[tuple[str, float]] = []
        self._admitted: list[tuple[str, float]] = []

    def record_attempt(self, result: str, cpu_seconds: float) -> None:
        """One scheduling cycle that looked at heads, by its result."""
        self._attempted.append((result, cpu_seconds))
        if len(self._attempted) >= _FLUSH_EVERY:
            self.flush()

    def record_admission(self, cluster_queue: str, wait: float) -> None:
        """One workload admitted (and its quota reserved) after ``wait`` seconds in its queue."""
        self._admitted.append((cluster_queue, wait))
        if len(self._admitted) >= _FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Move the noted cycles and admissions into the counters and histograms."""
        attempted, self._attempted = self._attempted, []
        for result, cpu_seconds in attempted:
            self.attempts_total.labels(result).inc()
            self.attempt_duration.labels(result).observe(cpu_seconds)
        admitted, self._admitted = self._admitted, []
        for cluster_queue, wait in admitted:
            self.admitted_total.labels(cluster_queue).inc()
            self.quota_reserved_total.labels(cluster_queue).inc()
            self.admission_wait.labels(cluster_queue).observe(wait)
            self.quota_reserved_wait.labels(cluster_queue).observe(wait)

    def refresh(self, controller: AdmissionController) -> None:
        """Bring the counters and histograms up to date; set every gauge from the controller's state."""
        self.flush()
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
