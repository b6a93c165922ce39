"""Builders shared by the admission tests: Kueue objects as plain dicts, and a harness that
drives an AdmissionController on a virtual clock."""

from __future__ import annotations

from typing import Any

from agent_fleet.admission import AdmissionController, Workload, parse_objects
from agent_fleet.admission.objects import FairSharing
from agent_fleet.clock import VirtualClock

API = "kueue.x-k8s.io/v1beta2"


def flavor(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cq(
    name: str,
    quotas: dict[str, Any],
    *,
    cohort: str | None = None,
    flavor_name: str = "default",
    strategy: str | None = None,
    preemption: dict[str, Any] | None = None,
    selector: dict[str, Any] | None = None,
    weight: Any = None,
    groups: list[dict[str, Any]] | None = None,
    fungibility: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``quotas``: resource -> nominal, or (nominal, borrowingLimit, lendingLimit) with None for unset.
    ``groups`` (from :func:`group`) replaces the one-flavor resource group ``quotas`` builds."""
    spec: dict[str, Any] = {
        "namespaceSelector": selector if selector is not None else {},
        "resourceGroups": groups if groups is not None else ([group({flavor_name: quotas})] if quotas else []),
    }
    if cohort:
        spec["cohortName"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    if preemption:
        spec["preemption"] = preemption
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    if fungibility:
        spec["flavorFungibility"] = fungibility
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def group(flavors: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One resource group: flavor -> {resource: nominal | (nominal, borrowingLimit, lendingLimit)}."""
    covered = list(next(iter(flavors.values())))
    out = []
    for fname, quotas in flavors.items():
        resources = []
        for res, q in quotas.items():
            nominal, borrowing, lending = q if isinstance(q, tuple) else (q, None, None)
            entry: dict[str, Any] = {"name": res, "nominalQuota": nominal}
            if borrowing is not None:
                entry["borrowingLimit"] = borrowing
            if lending is not None:
                entry["lendingLimit"] = lending
            resources.append(entry)
        out.append({"name": fname, "resources": resources})
    return {"coveredResources": covered, "flavors": out}


def cohort(
    name: str, quotas: dict[str, Any] | None = None, *, parent: str | None = None, weight: Any = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = [group({"default": quotas})]
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def lq(name: str, cluster_queue: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


class Harness:
    """A controller on a virtual clock; every ClusterQueue gets a LocalQueue of the same name."""

    def __init__(self, objects: list[dict[str, Any]], *, fair_sharing: FairSharing | None = None) -> None:
        items = list(objects)
        names = [o["metadata"]["name"] for o in items if o["kind"] == "ClusterQueue"]
        if not any(o["kind"] == "ResourceFlavor" for o in items):
            items.insert(0, flavor())
        items += [
            lq(n, n) for n in names if not any(o["kind"] == "LocalQueue" and o["metadata"]["name"] == n for o in items)
        ]
        self.clock = VirtualClock()
        self.admits: list[str] = []
        self.preempts: list[tuple[str, str, str]] = []
        self.ctl = AdmissionController(
            parse_objects(items),
            self.clock,
            on_admit=lambda w: self.admits.append(w.name),
            on_preempt=lambda w, reason, by: self.preempts.append((w.name, by.name, reason)),
            fair_sharing=fair_sharing,
        )

    def submit(
        self, name: str, queue: str, *, priority: int = 0, created: float | None = None, **requests: Any
    ) -> None:
        when = self.clock.now() if created is None else created
        self.ctl.submit(Workload(name=name, queue=queue, requests=requests, priority=priority, created=when))

    def admit(self, name: str, queue: str, *, priority: int = 0, **requests: Any) -> None:
        """Submit at a fresh instant and settle; the workload must be admitted."""
        self.clock.advance(1)
        self.submit(name, queue, priority=priority, **requests)
        self.settle()
        assert name in self.ctl.admitted(), f"{name} was not admitted: {self.ctl.pending()}"

    def reserve(
        self, name: str, queue: str, *, priority: int = 0, flavor_name: str = "default", **requests: Any
    ) -> None:
        """Put a workload in ``queue``'s ClusterQueue as already admitted now, whatever the quota
        says (Kueue's tests build their state with SimpleReserveQuota the same way)."""
        self.submit(name, queue, priority=priority, **requests)
        info = self.ctl.workloads[name]
        self.ctl.queues.delete(info)
        info.usage = {(flavor_name, r): v for r, v in info.requests.items() if r != "pods"}
        if "pods" in self.ctl.cache.cluster_queues[info.cluster_queue].group_of:
            info.usage[(flavor_name, "pods")] = info.pods
        info.admitted_at = self.clock.now()
        self.ctl.cache.add_workload(info)

    def settle(self) -> None:
        self.ctl.settle()

    @property
    def admitted(self) -> list[str]:
        return self.ctl.admitted()

    @property
    def active(self) -> list[str]:
        return self.ctl.pending()[0]

    @property
    def inadmissible(self) -> list[str]:
        return self.ctl.pending()[1]
