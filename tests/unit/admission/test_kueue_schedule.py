"""Scheduling cycles after Kueue's pkg/scheduler/scheduler_test.go (TestSchedule), with the
ClusterQueues defined at the top of that test: several flavors per resource group, borrowing
limits per flavor, lending limits, a second resource group, a flavor that does not exist.
Workloads there already admitted are placed as Kueue places them (SimpleReserveQuota); the
pending ones go through one cycle, and admissions, preemptions and what is left (active or
inadmissible) are compared. Cases with several pod sets per workload have no counterpart: an
agent session is one pod set."""

from __future__ import annotations

from typing import Any

from admission_builders import Harness, cq, flavor, group

RECLAIM_ANY = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def test_schedule() -> Harness:
    return Harness(
        [
            flavor("default"),
            flavor("on-demand"),
            flavor("spot"),
            flavor("model-a"),
            cq("sales", {"cpu": 50}, strategy="StrictFIFO"),
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
                preemption=RECLAIM_ANY,
                groups=[
                    group({"on-demand": {"cpu": (50, 10, None)}, "spot": {"cpu": (0, 100, None)}}),
                    group({"model-a": {"example.com/gpu": (20, 0, None)}}),
                ],
            ),
            cq("flavor-nonexistent-cq", {"cpu": 50}, flavor_name="nonexistent-flavor", strategy="StrictFIFO"),
            cq("lend-a", {"cpu": (3, None, 2)}, cohort="lend"),
            cq("lend-b", {"cpu": (2, None, 2)}, cohort="lend"),
        ]
    )


test_schedule.__test__ = False  # type: ignore[attr-defined]


def cycle(h: Harness) -> tuple[dict[str, tuple[str, dict[str, str]]], set[str]]:
    """One cycle: {admitted: (ClusterQueue, flavors)}, and the preempted."""
    result = h.ctl.run_cycle()
    admitted = {a.workload.name: (a.cluster_queue, a.flavors) for a in result.admitted}
    return admitted, {p.victim.name for p in result.preempted}


def left(h: Harness) -> tuple[list[str], list[str]]:
    return h.ctl.pending()


def test_admit_in_different_cohorts() -> None:
    h = test_schedule()
    h.submit("sales-new", "sales", cpu=1)
    h.submit("alpha-new", "eng-alpha", cpu=51)  # borrows
    admitted, _ = cycle(h)
    assert admitted == {"sales-new": ("sales", {"cpu": "default"}), "alpha-new": ("eng-alpha", {"cpu": "on-demand"})}


def test_admit_in_same_cohort_with_no_borrowing() -> None:
    h = test_schedule()
    h.submit("alpha-new", "eng-alpha", cpu=40)
    h.submit("beta-new", "eng-beta", cpu=40)
    admitted, _ = cycle(h)
    assert admitted == {
        "alpha-new": ("eng-alpha", {"cpu": "on-demand"}),
        "beta-new": ("eng-beta", {"cpu": "on-demand"}),
    }


def test_cannot_borrow_if_cohort_was_assigned_and_would_result_in_overadmission() -> None:
    h = test_schedule()
    h.submit("alpha-new", "eng-alpha", cpu=45)
    h.submit("beta-new", "eng-beta", cpu=56)
    admitted, _ = cycle(h)
    assert admitted == {"alpha-new": ("eng-alpha", {"cpu": "on-demand"})}
    assert left(h) == (["beta-new"], [])  # StrictFIFO: the head stays active


def test_can_borrow_if_cohort_was_assigned_and_will_not_result_in_overadmission() -> None:
    h = test_schedule()
    h.submit("alpha-new", "eng-alpha", cpu=45)
    h.submit("beta-new", "eng-beta", cpu=55)
    admitted, _ = cycle(h)
    assert admitted == {
        "alpha-new": ("eng-alpha", {"cpu": "on-demand"}),
        "beta-new": ("eng-beta", {"cpu": "on-demand"}),
    }


def test_can_borrow_if_needs_reclaim_from_cohort_in_different_flavor() -> None:
    h = test_schedule()
    h.reserve("user-on-demand", "eng-beta", flavor_name="on-demand", cpu=50)
    h.reserve("user-spot", "eng-beta", flavor_name="spot", cpu=1)
    h.submit("can-reclaim", "eng-alpha", cpu=100)
    h.submit("needs-to-borrow", "eng-beta", cpu=1)
    admitted, preempted = cycle(h)
    assert admitted == {"needs-to-borrow": ("eng-beta", {"cpu": "on-demand"})}
    assert preempted == set()
    assert left(h) == (["can-reclaim"], [])


def test_workload_exceeds_lending_limit_when_borrow_in_cohort() -> None:
    h = test_schedule()
    h.reserve("a", "lend-b", cpu=2)
    h.submit("b", "lend-b", cpu=3)
    admitted, _ = cycle(h)
    assert admitted == {}
    assert left(h) == ([], ["b"])


def test_preempt_workloads_in_cluster_queue_and_cohort() -> None:
    h = test_schedule()
    h.reserve("use-all-spot", "eng-alpha", flavor_name="spot", cpu=100)
    h.reserve("low-1", "eng-beta", flavor_name="on-demand", priority=-1, cpu=30)
    h.reserve("low-2", "eng-beta", flavor_name="on-demand", priority=-2, cpu=10)
    h.reserve("borrower", "eng-alpha", flavor_name="on-demand", cpu=60)
    h.submit("preemptor", "eng-beta", cpu=20)
    admitted, preempted = cycle(h)
    assert admitted == {}
    assert preempted == {"borrower", "low-2"}
    assert "preemptor" in left(h)[0]  # it waits, active, for its victims to go


def test_multiple_cluster_queues_need_preemption() -> None:
    h = Harness(
        [
            flavor("on-demand"),
            cq("other-alpha", {"cpu": (50, 50, None)}, cohort="other", flavor_name="on-demand"),
            cq("other-beta", {"cpu": (50, 10, None)}, cohort="other", flavor_name="on-demand", preemption=RECLAIM_ANY),
        ]
    )
    h.reserve("use-all", "other-alpha", flavor_name="on-demand", cpu=100)
    h.submit("preemptor", "other-beta", priority=-1, cpu=1)
    h.submit("pending", "other-alpha", priority=1, cpu=1)
    result = h.ctl.run_cycle()
    assert result.admitted == ()
    assert {p.victim.name for p in result.preempted} == {"use-all"}
    verdicts = {r.workload.name: r.inadmissible for r in result.requeued}
    assert verdicts == {"preemptor": False, "pending": True}
    # The victim leaves at once here (Kueue removes it when its eviction is observed); freed
    # quota in the cohort sends the parked workload back to its queue either way.
    assert left(h) == (["pending", "preemptor", "use-all"], [])


def test_cannot_borrow_resource_not_listed_in_cluster_queue() -> None:
    h = test_schedule()
    h.submit("new", "eng-alpha", **{"example.com/gpu": 1})
    admitted, _ = cycle(h)
    assert admitted == {}
    assert left(h) == (["new"], [])


def test_not_enough_resources_to_borrow_fallback_to_next_flavor() -> None:
    h = test_schedule()
    h.reserve("existing", "eng-beta", flavor_name="on-demand", cpu=45)
    h.submit("new", "eng-alpha", cpu=60)
    admitted, _ = cycle(h)
    assert admitted == {"new": ("eng-alpha", {"cpu": "spot"})}


def test_workload_does_not_fit_in_cluster_queue_with_nonexistent_flavor() -> None:
    h = test_schedule()
    h.submit("foo", "flavor-nonexistent-cq", cpu=1)
    admitted, _ = cycle(h)
    assert admitted == {}
    assert left(h) == (["foo"], [])
    assert any("nonexistent-flavor" in w and "inactive" in w for w in h.ctl.objects.warnings)


def shared_r1_r2() -> Harness:
    quotas: dict[str, Any] = {"r1": (10, 10, None), "r2": (10, 10, None)}
    return Harness([cq(name, quotas, cohort="co", preemption=RECLAIM_ANY) for name in ("cq1", "cq2", "cq3")])


def test_two_workloads_can_borrow_different_resources_from_the_same_flavor_in_one_cycle() -> None:
    h = shared_r1_r2()
    h.submit("wl1", "cq1", priority=-1, r1=16)
    h.submit("wl2", "cq2", priority=-2, r2=16)
    admitted, _ = cycle(h)
    assert set(admitted) == {"wl1", "wl2"}


def test_two_workloads_can_borrow_the_same_resource_if_it_fits_in_the_cohort_quota() -> None:
    h = shared_r1_r2()
    h.submit("wl1", "cq1", priority=-1, r1=16)
    h.submit("wl2", "cq2", priority=-2, r1=14)
    admitted, _ = cycle(h)
    assert set(admitted) == {"wl1", "wl2"}


def test_the_same_resource_beyond_the_cohort_quota_admits_only_the_first() -> None:
    # The converse of the case above: 16 + 15 exceeds the cohort's 30, so the second waits.
    h = shared_r1_r2()
    h.submit("wl1", "cq1", priority=-1, r1=16)
    h.submit("wl2", "cq2", priority=-2, r1=15)
    admitted, _ = cycle(h)
    assert set(admitted) == {"wl1"}
