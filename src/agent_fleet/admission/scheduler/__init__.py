"""The scheduling cycle: numbered steps over a snapshot, flavor assignment, preemption."""

from agent_fleet.admission.scheduler.cycle import Admitted, CycleResult, Preempted, Requeued, Scheduler

__all__ = ["Admitted", "CycleResult", "Preempted", "Requeued", "Scheduler"]
