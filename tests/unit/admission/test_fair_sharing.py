"""Fair sharing, each case taken from Kueue: preemption from
pkg/scheduler/preemption/preemption_fair_test.go (TestFairPreemptions, as of the release that
turned FairSharingPreemptWithinNominal on by default: a preemptor within its nominal quota
reclaims with reason InCohortReclamation) and head ordering from pkg/scheduler/scheduler_test.go
("with fair sharing: ..."). Admitted workloads are placed as Kueue's tests place them (all at the
same instant); then one scheduling cycle runs for the incoming workload and its preemptions are
compared."""

from __future__ import annotations

from typing import Any

import pytest
from admission_builders import Harness, cohort, cq, flavor, group, lq

from agent_fleet.admission import AdmissionController, Workload, parse_objects
from agent_fleet.admission.cache.fair_sharing import dominant_resource_share
from agent_fleet.admission.objects import FairSharing
from agent_fleet.admission.simulate import parse_scenario, simulate
from agent_fleet.clock import VirtualClock
from agent_fleet.errors import ConfigError

FS = "InCohortFairSharing"
CQR = "InClusterQueue"
RECLAIM = "InCohortReclamation"
BOTH = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")

_FULL = {
    "withinClusterQueue": "LowerPriority",
    "reclaimWithinCohort": "Any",
    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3},
}
BASE = [
    cq("a", {"cpu": 3}, cohort="all", preemption=_FULL),
    cq("b", {"cpu": 3}, cohort="all", preemption=_FULL),
    cq("c", {"cpu": 3}, cohort="all", preemption=_FULL),
    cq("preemptible", {"cpu": 0}, cohort="all"),
]
_ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def units(queue: str, *names: str, priority: int = 0) -> list[tuple[str, str, Any, int]]:
    return [(n, queue, 1, priority) for n in names]


CASES: dict[str, dict[str, Any]] = {
    "reclaim nominal from user using the most": dict(
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5") + units("c", "c1"),
        incoming=("c_incoming", "c", 1, 0),
        want={("b1", RECLAIM)},
        want_without_gate={("b1", FS)},
    ),
    "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough": dict(
        admitted=[("a1", "a", 3, 0), ("a2", "a", 1, 0), ("b1", "b", 2, 0), ("b2", "b", 3, 0)],
        incoming=("c_incoming", "c", 3, 0),
        want={("a1", RECLAIM)},
        want_without_gate={("a1", FS)},
    ),
    "reclaim borrowable quota from user using the most": dict(
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5") + units("c", "c1"),
        incoming=("a_incoming", "a", 1, 0),
        want={("b1", FS)},
    ),
    "preempt one from each CQ borrowing": dict(
        admitted=[
            ("a1", "a", "0.5", 0),
            ("a2", "a", "0.5", 0),
            ("a3", "a", 3, 0),
            ("b1", "b", "0.5", 0),
            ("b2", "b", "0.5", 0),
            ("b3", "b", 3, 0),
        ],
        incoming=("c_incoming", "c", 2, 0),
        want={("a1", RECLAIM), ("b1", RECLAIM)},
        want_without_gate={("a1", FS), ("b1", FS)},
    ),
    "can't preempt when everyone under nominal": dict(
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3") + units("c", "c1", "c2", "c3"),
        incoming=("c_incoming", "c", 1, 0),
        want=set(),
    ),
    "can't preempt when it would switch the imbalance": dict(
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5"),
        incoming=("a_incoming", "a", 2, 0),
        want=set(),
    ),
    "can preempt lower priority workloads from same CQ": dict(
        admitted=units("a", "a1_low", "a2_low", priority=-1)
        + units("a", "a3", "a4")
        + units("b", "b1", "b2", "b3", "b4", "b5"),
        incoming=("a_incoming", "a", 2, 0),
        want={("a1_low", CQR), ("a2_low", CQR)},
    ),
    "can preempt a combination of same CQ and highest user": dict(
        admitted=units("a", "a_low", priority=-1)
        + units("a", "a2", "a3")
        + units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        incoming=("a_incoming", "a", 2, 0),
        want={("a_low", CQR), ("b1", FS)},
    ),
    "preempt huge workload if there is no other option, as long as the target CQ gets a lower share": dict(
        admitted=[("b1", "b", 9, 0)],
        incoming=("a_incoming", "a", 2, 0),
        want={("b1", RECLAIM)},
        want_without_gate={("b1", FS)},
    ),
    "can't preempt huge workload if the incoming is also huge": dict(
        admitted=[("a1", "a", 2, 0), ("b1", "b", 7, 0)],
        incoming=("a_incoming", "a", 5, 0),
        want=set(),
    ),
    "can't preempt 2 smaller workloads if the incoming is huge": dict(
        admitted=[("b1", "b", 2, 0), ("b2", "b", 2, 0), ("b3", "b", 3, 0)],
        incoming=("a_incoming", "a", 6, 0),
        want=set(),
    ),
    "preempt from target and others even if over nominal": dict(
        admitted=[("a1_low", "a", 2, -1), ("a2_low", "a", 1, -1), ("b1", "b", 3, 0), ("b2", "b", 3, 0)],
        incoming=("a_incoming", "a", 4, 0),
        want={("a1_low", CQR), ("b1", FS)},
    ),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": dict(
        admitted=[("b1", "b", 2, 0), ("b2", "b", 1, 0), ("b3", "b", 2, 0), ("c1", "c", 1, 0)],
        incoming=("a_incoming", "a", "3.5", 0),
        want={("b2", FS)},
    ),
    "preempt from different cluster queues if the end result has a smaller max share": dict(
        admitted=[("b1", "b", 2, 0), ("b2", "b", "2.5", 0), ("c1", "c", 2, 0), ("c2", "c", "2.5", 0)],
        incoming=("a_incoming", "a", "3.5", 0),
        want={("b1", FS), ("c1", FS)},
    ),
    "scenario above does not flap": dict(
        admitted=[("a1", "a", "3.5", 0), ("b2", "b", "2.5", 0), ("c2", "c", "2.5", 0)],
        incoming=("b_incoming", "b", 2, 0),
        want=set(),
    ),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one element": dict(
        admitted=[("b1", "b", 3, 0), ("b2", "b", 3, 0), ("c1", "c", 3, 0)],
        incoming=("a_incoming", "a", 4, 0),
        want=set(),
    ),
    "workloads under priority threshold not capriciously preempted": dict(
        admitted=units("a", "a1", "a2", "a3")
        + units("b", "b1", "b2", "b3")
        + units("preemptible", "preemptible1", "preemptible2", "preemptible3", priority=-3),
        incoming=("a_incoming", "a", 2, 0),
        want=set(),
    ),
    "preempt lower priority first, even if big": dict(
        strategies=("LessThanInitialShare",),
        admitted=[("a1", "a", 3, 0), ("b_low", "b", 5, 0), ("b_high", "b", 1, 1)],
        incoming=("a_incoming", "a", 1, 0),
        want={("b_low", FS)},
    ),
    "preempt workload that doesn't transfer the imbalance, even if high priority": dict(
        strategies=("LessThanOrEqualToFinalShare",),
        admitted=[("a1", "a", 3, 0), ("b_low", "b", 5, 0), ("b_high", "b", 1, 1)],
        incoming=("a_incoming", "a", 1, 0),
        want={("b_high", FS)},
    ),
    "CQ with higher weight can preempt more": dict(
        objects=[
            cq("a", {"cpu": 3}, cohort="all", preemption=_ANY, weight="2"),
            cq("b", {"cpu": 3}, cohort="all", preemption=_ANY),
            cq("c", {"cpu": 3}, cohort="all", preemption=_ANY),
        ],
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        incoming=("a_incoming", "a", 2, 0),
        want={("b1", FS), ("b2", FS)},
    ),
    "can preempt anything borrowing from CQ with 0 weight": dict(
        objects=[
            cq("a", {"cpu": 3}, cohort="all", preemption=_ANY),
            cq("b", {"cpu": 3}, cohort="all", preemption=_ANY, weight="0"),
            cq("c", {"cpu": 3}, cohort="all", preemption=_ANY),
        ],
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        incoming=("a_incoming", "a", 3, 0),
        want={("b1", FS), ("b2", FS), ("b3", FS)},
    ),
    "can't preempt nominal from CQ with 0 weight": dict(
        objects=[
            cq("a", {"cpu": 3}, cohort="all", preemption=_ANY),
            cq("b", {"cpu": 3}, cohort="all", preemption=_ANY, weight="0"),
        ],
        admitted=units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3"),
        incoming=("a_incoming", "a", 1, 0),
        want=set(),
    ),
    "can't preempt nominal from Cohort with 0 weight": dict(
        objects=[
            cq("left-cq", {"cpu": 0}, cohort="root", preemption={"reclaimWithinCohort": "Any"}),
            cq("right-cq", {"cpu": 0}, cohort="right-cohort", preemption={"reclaimWithinCohort": "Any"}, weight="0"),
            cohort("right-cohort", {"cpu": 1}, parent="root", weight="0"),
        ],
        admitted=[("right-1", "right-cq", 1, 0)],
        incoming=("left-1", "left-cq", 1, 0),
        want=set(),
    ),
    "can preempt within cluster queue when no cohort": dict(
        objects=[cq("a", {"cpu": 1}, preemption={"withinClusterQueue": "LowerPriority"})],
        admitted=[("a1", "a", 1, 0)],
        incoming=("a_incoming", "a", 1, 1000),
        want={("a1", CQR)},
    ),
    # (usage, quota, subtree quota): ROOT(20,5,20); LEFT(5,5,7) [a(0,1,1), b(5,1,1)]; c(5,1,1);
    # RIGHT(10,5,7) [d(5,1,1), e(5,1,1)]. Weights: a and LEFT 2, e 0.99 for determinism.
    "hierarchical preemption": dict(
        objects=[
            cq("a", {"cpu": 1}, cohort="LEFT", weight="2", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 1}, cohort="LEFT"),
            cq("c", {"cpu": 1}, cohort="ROOT"),
            cq("d", {"cpu": 1}, cohort="RIGHT"),
            cq("e", {"cpu": 1}, cohort="RIGHT", weight="0.99"),
            cohort("ROOT", {"cpu": 5}),
            cohort("LEFT", {"cpu": 5}, parent="ROOT", weight="2"),
            cohort("RIGHT", {"cpu": 5}, parent="ROOT"),
        ],
        admitted=[(f"{q}{i}", q, 1, i) for q in "bcde" for i in range(1, 6)],
        incoming=("unit", "a", 5, 0),
        want={("b1", FS), ("b2", FS), ("c1", FS), ("c2", FS), ("e1", FS)},
    ),
    "borrowing cq in non-borrowing cohort is protected": dict(
        objects=[
            cq("a", {"cpu": 5}, cohort="ROOT", weight="10", preemption=_ANY),
            cq("b", {}, cohort="RIGHT", weight="0.1"),
            cohort("ROOT"),
            cohort("RIGHT", {"cpu": 1}, parent="ROOT", weight="0.1"),
        ],
        admitted=units("a", "a1", "a2", "a3", priority=-1) + units("b", "b1", priority=-1),
        incoming=("unit", "a", 5, 0),
        want={("a1", CQR), ("a2", CQR), ("a3", CQR)},
    ),
    "forced to preempt within clusterqueue because borrowing workload too important": dict(
        objects=[
            cq(
                "a",
                {"cpu": 5},
                cohort="ROOT",
                weight="10",
                preemption={"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority"},
            ),
            cq("b", {}, cohort="RIGHT", weight="0.1"),
            cohort("ROOT"),
            cohort("RIGHT", {"cpu": 3}, parent="ROOT", weight="0.1"),
        ],
        admitted=[*units("a", "a1", "a2", "a3", priority=-1), ("b1", "b", 4, 100)],
        incoming=("unit", "a", 4, 0),
        want={("a1", CQR), ("a2", CQR), ("a3", CQR)},
    ),
    "deep preemption": dict(
        objects=[
            cq("a", {"cpu": 0}, cohort="AAA", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 0}, cohort="BBB"),
            cohort("ROOT"),
            cohort("A", parent="ROOT", weight="1.01"),
            cohort("AA", parent="A"),
            cohort("AAA", parent="AA"),
            cohort("B", parent="ROOT", weight="0.99"),
            cohort("BB", parent="B"),
            cohort("BBB", parent="BB"),
            cohort("C", parent="ROOT"),
            cohort("CC", parent="C"),
            cohort("CCC", parent="CC"),
            cohort("CCCC", {"cpu": 1}, parent="CCC"),
        ],
        admitted=[("b1", "b", 1, 0)],
        incoming=("a1", "a", 1, 0),
        want={("b1", FS)},
    ),
    "cq with zero weight can reclaim nominal quota": dict(
        objects=[
            cq("a", {"cpu": 1}, cohort="ROOT", weight="0.0", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 0}, cohort="ROOT", weight="1.0"),
        ],
        admitted=[("b1", "b", 1, 0)],
        incoming=("a1", "a", 1, 0),
        want={("b1", RECLAIM)},
        want_without_gate={("b1", FS)},
    ),
    "cohort with zero weight can reclaim nominal quota": dict(
        objects=[
            cq("a", {"cpu": 0}, cohort="A", weight="0.0", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 0}, cohort="ROOT", weight="1.0"),
            cohort("A", {"cpu": 1}, parent="ROOT", weight="0.0"),
        ],
        admitted=[("b1", "b", 1, 0)],
        incoming=("a1", "a", 1, 0),
        want={("b1", FS)},
    ),
    # a: 2 premium within nominal + 5 cheap borrowed (a large share); b: 1 premium borrowed.
    "nominal first: workload fitting within nominal can preempt despite high aggregate DRS": dict(
        objects=[
            flavor("premium"),
            flavor("cheap"),
            cq(
                "a",
                {},
                cohort="all",
                groups=[group({"premium": {"cpu": 3}, "cheap": {"cpu": 0}})],
                preemption={"reclaimWithinCohort": "Any"},
                fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
            ),
            cq("b", {}, cohort="all", groups=[group({"premium": {"cpu": 0}, "cheap": {"cpu": 6}})]),
        ],
        admitted=[("a_prem1", "a", 1, 0, "premium"), ("a_prem2", "a", 1, 0, "premium")]
        + [(f"a_cheap{i}", "a", 1, 0, "cheap") for i in range(1, 6)]
        + [("b_prem1", "b", 1, 0, "premium")],
        incoming=("a_incoming", "a", 1, 0),
        want={("b_prem1", RECLAIM)},
        want_without_gate=set(),
    ),
    "zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero weight": dict(
        objects=[
            cq("a", {"cpu": 1}, cohort="all", weight="0", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 1}, cohort="all", weight="1"),
        ],
        admitted=[("a1", "a", 1, 0), ("b1", "b", 1, 0), ("b2", "b", 1, 0)],
        incoming=("a_incoming", "a", 1, 0),
        want=set(),
    ),
    "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight": dict(
        objects=[
            cohort("all", {"cpu": 3}),
            cq("a", {"cpu": 1}, cohort="all", weight="0", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 0}, cohort="all", weight="0"),
        ],
        admitted=[("b1", "b", 1, 0), ("b2", "b", 1, 0), ("b3", "b", 1, 0)],
        incoming=("a_incoming", "a", 2, 0),
        want={("b1", FS)},
    ),
    "non-zero weight borrowing preemptor preempts from a borrowing CQ": dict(
        objects=[
            cohort("all", {"cpu": 3}),
            cq("a", {"cpu": 1}, cohort="all", weight="1", preemption={"reclaimWithinCohort": "Any"}),
            cq("b", {"cpu": 0}, cohort="all", weight="1"),
        ],
        admitted=[("b1", "b", 1, 0), ("b2", "b", 1, 0), ("b3", "b", 1, 0)],
        incoming=("a_incoming", "a", 2, 0),
        want={("b1", FS)},
    ),
    # ROOT -> A (weight 0, 1 cpu) -> p (preemptor, 2 cpu), y (2 cpu); ROOT -> x (1 cpu).
    "candidates skipped by the first strategy are still available to the second strategy": dict(
        objects=[
            cohort("A", {"cpu": 1}, parent="ROOT", weight="0"),
            cq("p", {"cpu": 2}, cohort="A", weight="1", preemption={"reclaimWithinCohort": "Any"}),
            cq("y", {"cpu": 2}, cohort="A", weight="1"),
            cq("x", {"cpu": 1}, cohort="ROOT", weight="1"),
        ],
        admitted=[("p1", "p", 2, 0), ("y1", "y", 2, 0), ("y2", "y", 2, 0), ("x1", "x", 1, 0), ("x2", "x", 1, 0)],
        incoming=("p_incoming", "p", 1, 0),
        want={("y1", FS), ("x1", FS)},
    ),
}


def run_case(tc: dict[str, Any], *, within_nominal_gate: bool) -> set[tuple[str, str]]:
    fair = FairSharing(
        enable=True,
        preemption_strategies=tc.get("strategies", BOTH),
        preempt_within_nominal=within_nominal_gate,
    )
    h = Harness(tc.get("objects", BASE), fair_sharing=fair)
    for name, queue, cpu, priority, *flavor_name in tc["admitted"]:
        h.reserve(name, queue, priority=priority, flavor_name=(flavor_name or ["default"])[0], cpu=cpu)
    h.clock.advance(1)
    name, queue, cpu, priority = tc["incoming"]
    h.submit(name, queue, priority=priority, cpu=cpu)
    h.ctl.run_cycle()
    assert all(by == name for _, by, _ in h.preempts)
    return {(victim, reason) for victim, by, reason in h.preempts}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_fair_preemptions(case: str) -> None:
    assert run_case(CASES[case], within_nominal_gate=True) == CASES[case]["want"]


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_fair_preemptions_with_preempt_within_nominal_off(case: str) -> None:
    # The same cases with Kueue's FairSharingPreemptWithinNominal gate off (its behaviour before
    # the gate was turned on): every cross-queue victim must pass a share strategy.
    tc = CASES[case]
    assert run_case(tc, within_nominal_gate=False) == tc.get("want_without_gate", tc["want"])


def eng(preemptor_queue_extra: list[dict[str, Any]]) -> AdmissionController:
    """TestSchedule's eng cohort (StrictFIFO; eng-beta reclaims Any) plus extra ClusterQueues."""
    objects = [
        flavor("on-demand"),
        flavor("spot"),
        flavor("model-a"),
        cq(
            "eng-alpha",
            {},
            cohort="eng",
            strategy="StrictFIFO",
            groups=[group({"on-demand": {"cpu": (50, 50, None)}, "spot": {"cpu": (100, 0, None)}})],
        ),
        cq(
            "eng-beta",
            {},
            cohort="eng",
            strategy="StrictFIFO",
            preemption=_ANY,
            groups=[
                group({"on-demand": {"cpu": (50, 10, None)}, "spot": {"cpu": (0, 100, None)}}),
                group({"model-a": {"example.com/gpu": (20, 0, None)}}),
            ],
        ),
        *preemptor_queue_extra,
    ]
    names = [o["metadata"]["name"] for o in objects if o["kind"] == "ClusterQueue"]
    objects += [lq(n, n) for n in names]
    return AdmissionController(parse_objects(objects), VirtualClock(), fair_sharing=FairSharing(enable=True))


def place(ctl: AdmissionController, name: str, queue: str, flavor_name: str, cpu: int, created: float = 0) -> None:
    ctl.submit(Workload(name=name, queue=queue, requests={"cpu": cpu}, created=created))
    info = ctl.workloads[name]
    ctl.queues.delete(info)
    info.usage = {(flavor_name, "cpu"): cpu * 1000}
    info.admitted_at = ctl.clock.now()
    ctl.cache.add_workload(info)


def test_schedule_workload_with_lowest_share_first() -> None:
    # TestSchedule "with fair sharing: schedule workload with lowest share first".
    ctl = eng([cq("eng-shared", {}, cohort="eng", groups=[group({"on-demand": {"cpu": (10, 0, None)}})])])
    place(ctl, "all_nominal", "eng-alpha", "on-demand", 50)
    place(ctl, "borrowing", "eng-beta", "on-demand", 55)
    ctl.submit(Workload(name="older_new", queue="eng-beta", requests={"cpu": 1}, created=-60))
    ctl.submit(Workload(name="new", queue="eng-alpha", requests={"cpu": 5}, created=0))
    result = ctl.run_cycle()
    assert [a.workload.name for a in result.admitted] == ["new"]
    assert ctl.pending()[0] == ["older_new"]


def test_without_fair_sharing_the_older_head_goes_first() -> None:
    # The same state classically: both heads borrow, so the older one is admitted.
    ctl = eng([cq("eng-shared", {}, cohort="eng", groups=[group({"on-demand": {"cpu": (10, 0, None)}})])])
    ctl.scheduler.fair_sharing = None
    place(ctl, "all_nominal", "eng-alpha", "on-demand", 50)
    place(ctl, "borrowing", "eng-beta", "on-demand", 55)
    ctl.submit(Workload(name="older_new", queue="eng-beta", requests={"cpu": 1}, created=-60))
    ctl.submit(Workload(name="new", queue="eng-alpha", requests={"cpu": 5}, created=0))
    assert [a.workload.name for a in ctl.run_cycle().admitted] == ["older_new"]


def test_preempt_workload_from_cq_with_the_highest_share() -> None:
    # TestSchedule "with fair sharing: preempt workload from CQ with the highest share".
    ctl = eng([cq("eng-gamma", {}, cohort="eng", groups=[group({"on-demand": {"cpu": (50, 0, None)}})])])
    place(ctl, "all_spot", "eng-alpha", "spot", 100)
    for i in range(1, 5):
        place(ctl, f"alpha{i}", "eng-alpha", "on-demand", 20)
    for i, cpu in enumerate((10, 20, 20, 20), start=1):
        place(ctl, f"gamma{i}", "eng-gamma", "on-demand", cpu)
    ctl.submit(Workload(name="preemptor", queue="eng-beta", requests={"cpu": 30}))
    result = ctl.run_cycle()
    assert sorted(p.victim.name for p in result.preempted) == ["alpha1", "gamma1"]
    # eng-beta stays within its nominal quota: it reclaims (Kueue's FairSharingPreemptWithinNominal).
    assert {p.reason for p in result.preempted} == {RECLAIM}
    assert result.admitted == ()  # it waits for its victims to leave
    assert ctl.pending()[0] == ["alpha1", "gamma1", "preemptor"]


def test_dominant_resource_share_is_borrowing_over_what_the_cohort_can_lend() -> None:
    # 3 ClusterQueues of 3 cpu each: b borrowing 2 of the 9 the cohort can lend is 222.2 per mille.
    h = Harness(BASE, fair_sharing=FairSharing(enable=True))
    for i in range(5):
        h.reserve(f"b{i}", "b", cpu=1)
    node = h.ctl.cache.cluster_queues["b"]
    assert dominant_resource_share(node) == (0, pytest.approx(2000 / 9))
    assert dominant_resource_share(node, {("default", "cpu"): 1000}) == (0, pytest.approx(3000 / 9))
    assert dominant_resource_share(h.ctl.cache.cluster_queues["a"]) == (0, 0.0)


_FAIR = {"enable": True, "preemptionStrategies": ["LessThanOrEqualToFinalShare"]}
# a (3) runs its three; b (3) borrows c's three; c (3) lends. A fourth session of a must borrow too.
_LENDERS = [
    flavor(),
    cq("a", {"cpu": 3}, cohort="all", preemption=_ANY),
    cq("b", {"cpu": 3}, cohort="all", preemption=_ANY),
    cq("c", {"cpu": 3}, cohort="all"),
    lq("a", "a"),
    lq("b", "b"),
]
_LENDERS_LOAD = [{"name": f"b{i}", "queue": "b", "requests": {"cpu": 1}, "createdAt": 0} for i in range(6)]
_LENDERS_LOAD += [{"name": f"a{i}", "queue": "a", "requests": {"cpu": 1}, "createdAt": 0} for i in range(3)]
_LENDERS_LOAD.append({"name": "a-new", "queue": "a", "requests": {"cpu": 1}, "createdAt": 1})
# a stays within its nominal quota while it reclaims from b.
_WITHIN = [flavor(), cq("a", {"cpu": 3}, cohort="all", preemption=_ANY), cq("b", {"cpu": 3}, cohort="all")]
_WITHIN += [lq("a", "a"), lq("b", "b")]
_WITHIN_LOAD = [{"name": f"b{i}", "queue": "b", "requests": {"cpu": 1}, "createdAt": 0} for i in range(6)]
_WITHIN_LOAD.append({"name": "a1", "queue": "a", "requests": {"cpu": 2}, "createdAt": 1})
_CONFIG = "config.kueue.x-k8s.io/v1beta1"
_GATE_OFF = {"apiVersion": _CONFIG, "kind": "Configuration", "featureGates": {"FairSharingPreemptWithinNominal": False}}
# The scenarios below; the Kueue export's round trip runs each of them too.
SCENARIOS: dict[str, dict[str, Any]] = {
    "fair sharing key": {"objects": _LENDERS, "workloads": _LENDERS_LOAD, "fairSharing": _FAIR},
    "classic": {"objects": _LENDERS, "workloads": _LENDERS_LOAD},
    "fair sharing configuration": {
        "objects": [{"apiVersion": _CONFIG, "kind": "Configuration", "fairSharing": _FAIR}, *_LENDERS],
        "workloads": _LENDERS_LOAD,
    },
    "within nominal": {"objects": _WITHIN, "workloads": _WITHIN_LOAD, "fairSharing": {"enable": True}},
    "within nominal gate off": {
        "objects": [_GATE_OFF, *_WITHIN],
        "workloads": _WITHIN_LOAD,
        "fairSharing": {"enable": True},
    },
}


def test_scenario_key_enables_fair_sharing_in_simulate() -> None:
    # Under fair sharing a's fourth session takes one of b's back (b keeps the larger share).
    res = simulate(parse_scenario(SCENARIOS["fair sharing key"]))
    # b's six were admitted in the same instant: candidates tie on time and go by name.
    assert res.preempted == [{"name": "b0", "by": "a-new", "reason": FS}]
    assert "a-new" in res.admitted
    # Without the key, classical preemption never lets a borrowing head reclaim: it waits.
    classic = simulate(parse_scenario(SCENARIOS["classic"]))
    assert classic.preempted == [] and classic.pending_inadmissible == ["a-new"]
    # A Kueue Configuration object among the objects says the same as the key.
    from_config = simulate(parse_scenario(SCENARIOS["fair sharing configuration"]))
    assert from_config.preempted == res.preempted


def test_configuration_feature_gate_turns_within_nominal_reclamation_off() -> None:
    # a stays within its nominal quota: by default it reclaims, as Kueue does since the gate went beta.
    assert {p["reason"] for p in simulate(parse_scenario(SCENARIOS["within nominal"])).preempted} == {RECLAIM}
    assert {p["reason"] for p in simulate(parse_scenario(SCENARIOS["within nominal gate off"])).preempted} == {FS}


@pytest.mark.parametrize(
    ("fair", "message"),
    [
        ({"enable": "yes"}, "fairSharing.enable: must be true or false"),
        (
            {"enable": True, "preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]},
            "must be one of",
        ),
        ({"enable": True, "strategies": []}, "fairSharing.strategies: unknown field"),
        ([], "fairSharing: must be a mapping"),
    ],
)
def test_invalid_fair_sharing_is_one_clear_error(fair: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_scenario({"objects": [], "workloads": [], "fairSharing": fair})


def test_negative_weight_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"ClusterQueue 'a': spec.fairSharing.weight: must be non-negative"):
        parse_objects([cq("a", {"cpu": 1}, cohort="x", weight="-1")])


def test_tournament_compares_cohorts_by_their_own_share() -> None:
    # ROOT -> L (5 pods) -> l (0), ROOT -> R (2 pods) -> r (0). l uses 3, r uses 3: one pod is free.
    # l's and r's own shares are equal, and r's head is older; but at the root L stays within its
    # quota with l's head admitted (share 0) while R would borrow 2 of 7, so L's nominee wins.
    h = Harness(
        [
            cq("l", {"pods": 0}, cohort="L"),
            cq("r", {"pods": 0}, cohort="R"),
            cohort("ROOT"),
            cohort("L", {"pods": 5}, parent="ROOT"),
            cohort("R", {"pods": 2}, parent="ROOT"),
        ],
        fair_sharing=FairSharing(enable=True),
    )
    for i in range(3):
        h.reserve(f"l{i}", "l", pods=1)
        h.reserve(f"r{i}", "r", pods=1)
    h.clock.advance(1)
    h.submit("r-new", "r", created=0, pods=1)
    h.submit("l-new", "l", pods=1)
    result = h.ctl.run_cycle()
    assert [a.workload.name for a in result.admitted] == ["l-new"]
    assert "r-new" in h.active + h.inadmissible


@pytest.mark.parametrize(("gate", "winner"), [(True, "p-new"), (False, "q-new")])
def test_tournament_puts_heads_that_do_not_borrow_on_their_flavors_first(gate: bool, winner: str) -> None:
    # Kueue's FairSharingPrioritizeNonBorrowing. One pod of flavor x is left. p borrows three of
    # flavor y (a large share) but its head fits in p's own x; q's head would borrow x (a small
    # share). With the gate p's head goes first; without it the lower share does.
    objects = [
        flavor("x"),
        flavor("y"),
        cq("p", {}, cohort="all", groups=[group({"x": {"cpu": 2}, "y": {"cpu": 0}})]),
        cq("q", {}, cohort="all", groups=[group({"x": {"cpu": 0}, "y": {"cpu": 0}})]),
        cq("lender", {}, cohort="all", groups=[group({"x": {"cpu": 0}, "y": {"cpu": 4}})]),
    ]
    h = Harness(objects, fair_sharing=FairSharing(enable=True, prioritize_non_borrowing=gate))
    h.reserve("p-x", "p", flavor_name="x", cpu=1)
    h.reserve("p-y", "p", flavor_name="y", cpu=3)
    h.clock.advance(1)
    h.submit("q-new", "q", created=0, cpu=1)
    h.submit("p-new", "p", cpu=1)
    result = h.ctl.run_cycle()
    assert [a.workload.name for a in result.admitted] == [winner]
    assert [a.flavors["cpu"] for a in result.admitted] == ["x"]
