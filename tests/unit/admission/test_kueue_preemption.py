"""More of Kueue's pkg/scheduler/preemption/preemption_test.go (TestPreemption), with the
ClusterQueues defined at the top of that test: borrowWithinCohort thresholds, lending limits,
two resources per workload, and reclamation across a cohort tree. Admitted workloads are placed
as Kueue's test places them (all at the same instant); one cycle runs for the incoming workload."""

from __future__ import annotations

from typing import Any

import pytest
from admission_builders import Harness, cohort, cq

IN_CQ = "InClusterQueue"
RECLAIM = "InCohortReclamation"
WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

_BWC = {"policy": "LowerPriority", "maxPriorityThreshold": 0}
_LOWER = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
DEFAULT_QUEUES = [
    cq(
        "a_standard",
        {"cpu": (1, 12, None)},
        cohort="with_shared_cq",
        preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": _BWC},
    ),
    cq(
        "b_standard",
        {"cpu": (1, 12, None)},
        cohort="with_shared_cq",
        preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any", "borrowWithinCohort": _BWC},
    ),
    cq(
        "a_best_effort",
        {"cpu": (1, 12, None)},
        cohort="with_shared_cq",
        preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": _BWC},
    ),
    cq(
        "b_best_effort",
        {"cpu": (0, 13, None)},
        cohort="with_shared_cq",
        preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": _BWC},
    ),
    cq("shared", {"cpu": 10}, cohort="with_shared_cq"),
    cq("lend1", {"cpu": (6, None, 4)}, cohort="cohort-lend", preemption=_LOWER),
    cq("lend2", {"cpu": (6, None, 2)}, cohort="cohort-lend", preemption=_LOWER),
    cq(
        "a",
        {"cpu": 2, "memory": 2},
        cohort="cohort-three",
        preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    ),
    cq("b", {"cpu": 2, "memory": 2}, cohort="cohort-three"),
    cq("c", {"cpu": 2, "memory": 2}, cohort="cohort-three"),
]

# (name, ClusterQueue, priority, requests)
Admitted = tuple[str, str, int, dict[str, Any]]


def unit(name: str, queue: str, priority: int, **requests: Any) -> Admitted:
    return (name, queue, priority, requests)


CASES: dict[str, dict[str, Any]] = {
    "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue": dict(
        admitted=[unit("a_standard", "a_standard", 1, cpu=13)],
        incoming=unit("in", "a_standard", 2, cpu=1),
        want=set(),
    ),
    "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal": dict(
        admitted=[
            unit("a_standard_1", "a_standard", 1, cpu=10),
            unit("a_standard_2", "a_standard", 1, cpu=1),
            unit("b_standard_1", "b_standard", 1, cpu=1),
            unit("b_standard_2", "b_standard", 2, cpu=1),
        ],
        incoming=unit("in", "b_standard", 3, cpu=1),
        want={("b_standard_1", IN_CQ)},
    ),
    "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold": dict(
        admitted=[
            unit("b_standard_high", "b_standard", 2, cpu=10),
            unit("b_standard_mid", "b_standard", 1, cpu=1),
            unit("a_best_effort_low", "a_best_effort", -1, cpu=1),
            unit("a_best_effort_lower", "a_best_effort", -2, cpu=1),
        ],
        incoming=unit("in", "b_standard", 2, cpu=2),
        want={("b_standard_mid", IN_CQ), ("a_best_effort_lower", WHILE_BORROWING)},
    ),
    "preempt from all ClusterQueues in cohort-lend": dict(
        admitted=[
            unit("lend1-low", "lend1", -1, cpu=3),
            unit("lend1-mid", "lend1", 0, cpu=2),
            unit("lend2-low", "lend2", -1, cpu=3),
            unit("lend2-mid", "lend2", 0, cpu=4),
        ],
        incoming=unit("in", "lend1", 0, cpu=4),
        want={("lend1-low", IN_CQ), ("lend2-low", RECLAIM)},
    ),
    "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit": dict(
        admitted=[unit("lend2-low", "lend2", -1, cpu=10)],
        incoming=unit("in", "lend1", 0, cpu=9),
        want=set(),
    ),
    "preemptions from cq when target queue is exhausted for the single requested resource": dict(
        admitted=[
            unit("a1", "a", -2, cpu=1),
            unit("a2", "a", -2, cpu=1),
            unit("a3", "a", -1, cpu=1),
            unit("b1", "b", 0, cpu=1),
            unit("b2", "b", 0, cpu=1),
            unit("b3", "b", 0, cpu=1),
        ],
        incoming=unit("in", "a", 0, cpu=2),
        want={("a1", IN_CQ), ("a2", IN_CQ)},
    ),
    "preemptions from cq when target queue is exhausted for two requested resources": dict(
        admitted=[
            unit("a1", "a", -2, cpu=1, memory=1),
            unit("a2", "a", -2, cpu=1, memory=1),
            unit("a3", "a", -1, cpu=1, memory=1),
            unit("b1", "b", 0, cpu=1, memory=1),
            unit("b2", "b", 0, cpu=1, memory=1),
            unit("b3", "b", 0, cpu=1, memory=1),
        ],
        incoming=unit("in", "a", 0, cpu=2, memory=2),
        want={("a1", IN_CQ), ("a2", IN_CQ)},
    ),
    "preemptions from cq when target queue is exhausted for one requested resource, but not the other": dict(
        admitted=[
            unit("a1", "a", -2, cpu=1),
            unit("a2", "a", -2, cpu=1),
            unit("a3", "a", -1, cpu=1),
            unit("b1", "b", 0, cpu=1),
            unit("b2", "b", 0, cpu=1),
            unit("b3", "b", 0, cpu=1),
        ],
        incoming=unit("in", "a", 0, cpu=2, memory=2),
        want={("a1", IN_CQ), ("a2", IN_CQ)},
    ),
    "allow preemption from other cluster queues if target cq is not exhausted for the requested resource": dict(
        admitted=[
            unit("a1", "a", -1, cpu=1),
            unit("b1", "b", 0, cpu=1),
            unit("b2", "b", 0, cpu=1),
            unit("b3", "b", 0, cpu=1),
            unit("b4", "b", 0, cpu=1),
            unit("b5", "b", -1, cpu=1),
        ],
        incoming=unit("in", "a", 0, cpu=2),
        want={("a1", IN_CQ), ("b5", RECLAIM)},
    ),
    "long range preemption": dict(
        queues=[
            cq("cq-left", {"cpu": 10}, cohort="cohort-left", preemption={"reclaimWithinCohort": "Any"}),
            cq("cq-right", {"cpu": 0}, cohort="cohort-right"),
            cohort("cohort-left", parent="root"),
            cohort("cohort-right", parent="root"),
        ],
        admitted=[unit("to-be-preempted", "cq-right", 0, cpu=5)],
        incoming=unit("incoming", "cq-left", 0, cpu=8),
        want={("to-be-preempted", RECLAIM)},
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_preemption(case: str) -> None:
    tc = CASES[case]
    h = Harness(tc.get("queues", DEFAULT_QUEUES))
    for name, queue, priority, requests in tc["admitted"]:
        h.reserve(name, queue, priority=priority, **requests)
    h.clock.advance(1)
    name, queue, priority, requests = tc["incoming"]
    h.submit(name, queue, priority=priority, **requests)
    result = h.ctl.run_cycle()
    assert {(p.victim.name, p.reason) for p in result.preempted} == tc["want"]
    assert result.admitted == ()  # either it waits for its victims, or it cannot run yet


# Kueue's preemption_hierarchical_test.go (TestHierarchicalPreemptions). A ClusterQueue there
# with a flavor and no quota has nominal 0 here.
_ANY_LOWER = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
_ANY_BWC = {**_ANY_LOWER, "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0}}


def _tree(*queues: dict[str, Any], c_quota: int = 2) -> list[dict[str, Any]]:
    return [cohort("r"), cohort("c", {"cpu": c_quota}, parent="r"), *queues]


HIERARCHICAL: dict[str, dict[str, Any]] = {
    "preempt with hierarchical advantage": dict(
        queues=_tree(
            cq("q", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
            cq("q_borrowing", {"cpu": 0}, cohort="r", preemption=_ANY_LOWER),
        ),
        admitted=[unit("admitted2", "q_borrowing", 0, cpu=2)],
        incoming=unit("in", "q", 0, cpu=2),
        want={("admitted2", RECLAIM)},
    ),
    "avoid queues within nominal quota": dict(
        queues=_tree(
            cq("q_nominal", {"cpu": 2}, cohort="r", preemption=_ANY_LOWER),
            cq("q", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
            cq("q_borrowing", {"cpu": 0}, cohort="r", preemption=_ANY_LOWER),
        ),
        admitted=[unit("admitted1", "q_nominal", -10, cpu=2), unit("admitted2", "q_borrowing", 0, cpu=2)],
        incoming=unit("in", "q", 0, cpu=2),
        want={("admitted2", RECLAIM)},
    ),
    "preempt multiple with hierarchical advantage": dict(
        queues=_tree(
            cq("q", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
            cq("q_borrowing", {"cpu": 0}, cohort="r", preemption=_ANY_LOWER),
        ),
        admitted=[unit("admitted1", "q_borrowing", 1, cpu=1), unit("admitted2", "q_borrowing", 2, cpu=1)],
        incoming=unit("in", "q", 0, cpu=2),
        want={("admitted1", RECLAIM), ("admitted2", RECLAIM)},
    ),
    "preempt in cohort and own CQ": dict(
        queues=_tree(
            cq("q", {"cpu": 0}, cohort="c", preemption=_ANY_BWC),
            cq("q_same_cohort", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
            c_quota=3,
        ),
        admitted=[
            unit("admitted_not_preemptible", "q_same_cohort", 1, cpu=1),
            unit("admitted_preemptible", "q_same_cohort", 0, cpu=2),
            unit("admitted_own_queue", "q", -1, cpu=1),
        ],
        incoming=unit("in", "q", 1, cpu=2),
        want={("admitted_own_queue", IN_CQ), ("admitted_preemptible", WHILE_BORROWING)},
    ),
    "prefer to preempt hierarchical candidate": dict(
        queues=_tree(
            cq("q", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
            cq("q_borrowing", {"cpu": 0}, cohort="r", preemption=_ANY_LOWER),
        ),
        admitted=[unit("admitted_borrowing", "q_borrowing", 1, cpu=1), unit("admitted_same_queue", "q", -2, cpu=1)],
        incoming=unit("in", "q", 0, cpu=1),
        want={("admitted_borrowing", RECLAIM)},
    ),
    "forced to preempt priority candidate": dict(
        queues=_tree(
            cq("q", {"cpu": 0}, cohort="c", preemption=_ANY_BWC),
            cq("q_nominal", {"cpu": 2}, cohort="r", preemption=_ANY_LOWER),
            cq("q_same_cohort", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
        ),
        admitted=[
            unit("admitted_nominal", "q_nominal", -10, cpu=2),
            unit("admitted_same_cohort", "q_same_cohort", -1, cpu=2),
        ],
        incoming=unit("in", "q", 0, cpu=2),
        want={("admitted_same_cohort", WHILE_BORROWING)},
    ),
    "incoming workload fits in CQ nominal quota": dict(
        queues=_tree(
            cq("q", {"cpu": 4}, cohort="c", preemption=_ANY_LOWER),
            cq("q_borrowing", {"cpu": 0}, cohort="r", preemption=_ANY_LOWER),
            cq("q_same_cohort", {"cpu": 0}, cohort="c", preemption=_ANY_LOWER),
        ),
        admitted=[
            unit("admitted_borrowing", "q_borrowing", 10, cpu=3),
            unit("admitted_same_cohort", "q_same_cohort", 10, cpu=3),
        ],
        incoming=unit("in", "q", 0, cpu=4),
        want={("admitted_borrowing", RECLAIM), ("admitted_same_cohort", RECLAIM)},
    ),
}


@pytest.mark.parametrize("case", list(HIERARCHICAL), ids=list(HIERARCHICAL))
def test_hierarchical_preemption(case: str) -> None:
    tc = HIERARCHICAL[case]
    h = Harness(tc["queues"])
    for name, queue, priority, requests in tc["admitted"]:
        h.reserve(name, queue, priority=priority, **requests)
    h.clock.advance(1)
    name, queue, priority, requests = tc["incoming"]
    h.submit(name, queue, priority=priority, **requests)
    result = h.ctl.run_cycle()
    assert {(p.victim.name, p.reason) for p in result.preempted} == tc["want"]
