"""``agent-fleet queues simulate``: a workload trace through the admission controller on a
virtual clock (SPEC.md, "Admission scenarios").

The run drives :class:`AdmissionController` — the class live runs use — and only moves
the clock: at each instant, finishes are applied first (explicit events in file order,
then runtimes in name order), then creations in file order, then cycles run until a fixed
point. A workload with a ``runtime`` finishes that long after its (last) admission; a
preemption restarts its runtime.

Fair sharing. SPEC.md's scenario format takes one more, optional, top-level key, spelled as in
Kueue's manager configuration::

    fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}

``preemptionStrategies`` is one of ``[LessThanOrEqualToFinalShare]``, ``[LessThanInitialShare]``
or both in that order (the default when omitted or empty). The same setting may come as a Kueue
``Configuration`` object (``apiVersion: config.kueue.x-k8s.io/v1beta1``) among ``objects``; the
top-level key wins. That object's ``featureGates`` may turn off the two fair-sharing gates Kueue
enables by default (``FairSharingPreemptWithinNominal``, ``FairSharingPrioritizeNonBorrowing``).
With fair sharing enabled, each ClusterQueue's and Cohort's ``spec.fairSharing.weight`` (default
1) weighs its dominant resource share, heads are ordered by share, and preemption in a cohort
follows the strategies, with reason ``InCohortFairSharing`` (``InCohortReclamation`` when the
preemptor stays within its nominal quota).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_fleet.admission.controller import AdmissionController
from agent_fleet.admission.kueue import load_kueue_yaml, parse_fair_sharing
from agent_fleet.admission.objects import FairSharing, KueueObjects
from agent_fleet.admission.scheduler import CycleResult
from agent_fleet.admission.workload import Workload
from agent_fleet.clock import VirtualClock
from agent_fleet.config import load_yaml, read_yaml_file
from agent_fleet.errors import ConfigError

__all__ = ["Scenario", "SimulationResult", "load_scenario", "parse_scenario", "simulate"]

_FINISH, _CREATE = 0, 1
# (time, kind, tiebreak, name, generation): generation invalidates a runtime finish after a preemption.
_Event = tuple[float, int, tuple[int, str], str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioWorkload:
    workload: Workload
    runtime: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    objects: KueueObjects
    workloads: tuple[ScenarioWorkload, ...]
    finishes: tuple[tuple[float, str], ...] = ()
    fair_sharing: FairSharing | None = None  # None: as the objects say (off without a Configuration)


@dataclass(slots=True)
class SimulationResult:
    admitted: list[str] = field(default_factory=list)
    pending_active: list[str] = field(default_factory=list)
    pending_inadmissible: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    preempted: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    end: float = 0.0
    cycles: int = 0
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "final": {
                "admitted": self.admitted,
                "pending": {"active": self.pending_active, "inadmissible": self.pending_inadmissible},
                "finished": self.finished,
                "preempted": self.preempted,
            },
            "timeline": self.timeline,
        }


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: must be a non-negative number")
    return float(value)


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    return parse_scenario(load_yaml(read_yaml_file(p, what="scenario"), source=str(p)))


def parse_scenario(data: Any) -> Scenario:
    if not isinstance(data, Mapping):
        raise ConfigError("scenario: must be a mapping with objects and workloads")
    for key in data:
        if key not in ("objects", "workloads", "events", "fairSharing"):
            raise ConfigError(f"scenario: unknown key {key!r} (expected objects, workloads, events, fairSharing)")
    fair_sharing = parse_fair_sharing(data["fairSharing"], "scenario") if "fairSharing" in data else None
    raw_objects = data.get("objects") or []
    if not isinstance(raw_objects, list):
        raise ConfigError("scenario: objects: must be a list")
    objects = load_kueue_yaml(raw_objects)
    raw_workloads = data.get("workloads") or []
    if not isinstance(raw_workloads, list):
        raise ConfigError("scenario: workloads: must be a list")
    workloads: list[ScenarioWorkload] = []
    created: dict[str, float] = {}
    known = {"name", "queue", "priorityClass", "priorityClassName", "priority", "requests", "createdAt", "runtime"}
    for i, raw in enumerate(raw_workloads):
        if not isinstance(raw, Mapping):
            raise ConfigError(f"workload #{i + 1}: must be a mapping")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"workload #{i + 1}: name: required")
        where = f"workload {name!r}"
        for key in raw:
            if key not in known:
                raise ConfigError(f"{where}: {key}: unknown field")
        if name in created:
            raise ConfigError(f"{where}: name: duplicate")
        queue = raw.get("queue")
        if not isinstance(queue, str) or not queue:
            raise ConfigError(f"{where}: queue: required")
        if objects.resolve_local_queue(queue) is None:
            raise ConfigError(f"{where}: queue: no LocalQueue {queue!r}")
        pclass = raw.get("priorityClass", raw.get("priorityClassName"))
        if pclass is not None and (not isinstance(pclass, str) or pclass not in objects.priority_classes):
            raise ConfigError(f"{where}: priorityClass: no WorkloadPriorityClass {pclass!r}")
        priority = raw.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ConfigError(f"{where}: priority: must be an integer")
        if priority is not None and pclass is not None:
            raise ConfigError(f"{where}: priority: give priority or priorityClass, not both")
        requests = raw.get("requests") or {}
        if not isinstance(requests, Mapping):
            raise ConfigError(f"{where}: requests: must be a mapping")
        created_at = _number(raw.get("createdAt", 0), f"{where}: createdAt")
        runtime = raw.get("runtime")
        workloads.append(
            ScenarioWorkload(
                workload=Workload(
                    name=name,
                    queue=queue,
                    requests=dict(requests),
                    priority=priority,
                    priority_class=pclass,
                    created=created_at,
                ),
                runtime=None if runtime is None else _number(runtime, f"{where}: runtime"),
            )
        )
        created[name] = created_at
    raw_events = data.get("events") or []
    if not isinstance(raw_events, list):
        raise ConfigError("scenario: events: must be a list")
    finishes: list[tuple[float, str]] = []
    for i, ev in enumerate(raw_events):
        where = f"event #{i + 1}"
        if not isinstance(ev, Mapping) or set(ev) != {"at", "finish"}:
            raise ConfigError(f"{where}: must be {{at: T, finish: NAME}}")
        at = _number(ev["at"], f"{where}: at")
        target = ev["finish"]
        if target not in created:
            raise ConfigError(f"{where}: finish: no workload {target!r}")
        if at < created[target]:
            raise ConfigError(f"{where}: at: before workload {target!r} is created")
        finishes.append((at, str(target)))
    if fair_sharing is not None and objects.fair_sharing is not None:
        # The key sets enable and strategies; feature gates still come from a Configuration.
        gates = objects.fair_sharing
        fair_sharing = replace(
            fair_sharing,
            preempt_within_nominal=gates.preempt_within_nominal,
            prioritize_non_borrowing=gates.prioritize_non_borrowing,
        )
    return Scenario(objects=objects, workloads=tuple(workloads), finishes=tuple(finishes), fair_sharing=fair_sharing)


def _t(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 9)


def _record_cycle(
    cycle: CycleResult,
    now: float,
    result: SimulationResult,
    generation: dict[str, int],
    runtimes: Mapping[str, float | None],
    events: list[_Event],
    log: Callable[[dict[str, Any]], None],
) -> None:
    """One admission cycle's preemptions, admissions (their runtime's finish is scheduled) and
    inadmissible requeues, in the result and the timeline."""
    result.cycles += 1
    for p in cycle.preempted:
        victim = p.victim.name
        generation[victim] = generation.get(victim, 0) + 1
        result.preempted.append({"name": victim, "by": p.by.name, "reason": p.reason, "at": _t(now)})
        log({"at": _t(now), "event": "preempted", "workload": victim, "by": p.by.name, "reason": p.reason})
    for adm in cycle.admitted:
        name = adm.workload.name
        gen = generation.setdefault(name, 0)
        log(
            {
                "at": _t(now),
                "event": "admitted",
                "workload": name,
                "cluster_queue": adm.cluster_queue,
                "flavors": dict(sorted(adm.flavors.items())),
                "borrowing": adm.borrowing,
            }
        )
        runtime = runtimes.get(name)
        if runtime is not None:
            heapq.heappush(events, (now + runtime, _FINISH, (1, name), name, gen))
    for req in cycle.requeued:
        if req.inadmissible:
            log({"at": _t(now), "event": "inadmissible", "workload": req.workload.name, "reason": req.reason})


def simulate(scenario: Scenario, *, record_timeline: bool = True) -> SimulationResult:
    clock = VirtualClock()
    controller = AdmissionController(scenario.objects, clock, with_metrics=False, fair_sharing=scenario.fair_sharing)
    result = SimulationResult(warnings=scenario.objects.warnings)
    runtimes = {sw.workload.name: sw.runtime for sw in scenario.workloads}
    order = itertools.count()
    events: list[_Event] = []
    for at, name in scenario.finishes:
        heapq.heappush(events, (at, _FINISH, (0, f"{next(order):012d}"), name, -1))
    for sw in scenario.workloads:
        heapq.heappush(events, (sw.workload.created, _CREATE, (0, f"{next(order):012d}"), sw.workload.name, 0))
    by_name = {sw.workload.name: sw.workload for sw in scenario.workloads}
    generation: dict[str, int] = {}
    finished: set[str] = set()
    timeline = result.timeline

    def log(entry: dict[str, Any]) -> None:
        if record_timeline:
            timeline.append(entry)

    while events:
        now = events[0][0]
        clock.set(now)
        while events and events[0][0] == now:
            _, kind, _, name, gen = heapq.heappop(events)
            if kind == _FINISH:
                if name in finished or (gen >= 0 and generation.get(name) != gen):
                    continue
                if controller.finish(name):
                    finished.add(name)
                    log({"at": _t(now), "event": "finished", "workload": name})
                elif name not in controller.workloads:
                    # Finished before it was ever submitted: it never runs.
                    finished.add(name)
            else:
                if name in finished:
                    continue
                info_queue = by_name[name].queue
                controller.submit(by_name[name])
                info = controller.workloads[name]
                log(
                    {
                        "at": _t(now),
                        "event": "created",
                        "workload": name,
                        "queue": info_queue,
                        "cluster_queue": info.cluster_queue,
                    }
                )
        for cycle in controller.settle():
            _record_cycle(cycle, now, result, generation, runtimes, events, log)
        result.end = now

    result.admitted = controller.admitted()
    result.pending_active, result.pending_inadmissible = controller.pending()
    result.finished = sorted(finished)
    result.preempted = [
        {"name": p["name"], "by": p["by"], "reason": p["reason"]}
        for p in sorted(result.preempted, key=lambda p: (p["name"], p["at"], p["by"]))
    ]
    return result


def format_result(result: SimulationResult) -> str:
    """A short human summary of a simulation."""
    lines = [
        f"admitted ({len(result.admitted)}): {', '.join(result.admitted) or '-'}",
        f"pending active ({len(result.pending_active)}): {', '.join(result.pending_active) or '-'}",
        f"pending inadmissible ({len(result.pending_inadmissible)}): {', '.join(result.pending_inadmissible) or '-'}",
        f"finished ({len(result.finished)}): {', '.join(result.finished) or '-'}",
    ]
    if result.preempted:
        lines.append("preempted:")
        lines.extend(f"  {p['name']} by {p['by']} ({p['reason']})" for p in result.preempted)
    lines.append(f"timeline ({len(result.timeline)} entries, end at t={_t(result.end)}):")
    for entry in result.timeline:
        extra = ", ".join(f"{k}={v}" for k, v in entry.items() if k not in ("at", "event", "workload"))
        lines.append(f"  t={entry['at']:<8} {entry['event']:<12} {entry['workload']}" + (f"  {extra}" if extra else ""))
    return "\n".join(lines)
