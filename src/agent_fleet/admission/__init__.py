"""Admission with Kueue's semantics: every agent session is a Workload that passes
ClusterQueue quotas, cohorts and preemption before it runs.

Two caches and a loop: :mod:`.queue` (what waits), :mod:`.cache` (what holds quota) and
:mod:`.scheduler` (the cycle). :class:`AdmissionController` is the live API;
:func:`simulate` runs a trace through it on a virtual clock.
"""

from agent_fleet.admission.controller import AdmissionController, OnAdmit, OnPreempt
from agent_fleet.admission.kueue import default_objects, load_kueue_yaml, parse_objects
from agent_fleet.admission.metrics import AdmissionMetrics
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
