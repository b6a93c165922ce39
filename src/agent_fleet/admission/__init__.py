"""Admission with Kueue's semantics: every agent session is a Workload that passes
ClusterQueue quotas, cohorts and preemption before it runs.

Two caches and a loop: :mod:`.queue` (what waits), :mod:`.cache` (what holds quota) and
:mod:`.scheduler` (the cycle). :class:`AdmissionController` is the live API;
:func:`simulate` runs a trace through it on a virtual clock.

Every name is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports

if TYPE_CHECKING:
    from agent_fleet.admission.controller import AdmissionController, OnAdmit, OnPreempt
    from agent_fleet.admission.kueue import default_objects, load_kueue_yaml, parse_objects
    from agent_fleet.admission.kueue_metrics import AdmissionMetrics
    from agent_fleet.admission.objects import KueueObjects
    from agent_fleet.admission.scheduler import Admitted, CycleResult, Preempted, Requeued
    from agent_fleet.admission.simulate import Scenario, SimulationResult, load_scenario, parse_scenario, simulate
    from agent_fleet.admission.workload import Workload

__all__ = [
    "AdmissionController",
    "AdmissionMetrics",
    "Admitted",
    "CycleResult",
    "KueueObjects",
    "OnAdmit",
    "OnPreempt",
    "Preempted",
    "Requeued",
    "Scenario",
    "SimulationResult",
    "Workload",
    "default_objects",
    "load_kueue_yaml",
    "load_scenario",
    "parse_objects",
    "parse_scenario",
    "simulate",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "AdmissionController": "agent_fleet.admission.controller",
        "AdmissionMetrics": "agent_fleet.admission.kueue_metrics",
        "Admitted": "agent_fleet.admission.scheduler",
        "CycleResult": "agent_fleet.admission.scheduler",
        "KueueObjects": "agent_fleet.admission.objects",
        "OnAdmit": "agent_fleet.admission.controller",
        "OnPreempt": "agent_fleet.admission.controller",
        "Preempted": "agent_fleet.admission.scheduler",
        "Requeued": "agent_fleet.admission.scheduler",
        "Scenario": "agent_fleet.admission.simulate",
        "SimulationResult": "agent_fleet.admission.simulate",
        "Workload": "agent_fleet.admission.workload",
        "default_objects": "agent_fleet.admission.kueue",
        "load_kueue_yaml": "agent_fleet.admission.kueue",
        "load_scenario": "agent_fleet.admission.simulate",
        "parse_objects": "agent_fleet.admission.kueue",
        "parse_scenario": "agent_fleet.admission.simulate",
        "simulate": "agent_fleet.admission.simulate",
    },
)
