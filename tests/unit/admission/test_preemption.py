"""Preemption rules, each case taken from Kueue's pkg/scheduler/preemption/preemption_test.go
(TestPreemption; ClusterQueues as defined at the top of that test) and run end to end: the
admitted workloads are admitted by the controller first, then the incoming one arrives."""

from __future__ import annotations

from admission_builders import Harness, cq

LOWER = {"withinClusterQueue": "LowerPriority"}


def standalone() -> Harness:
    return Harness([cq("standalone", {"cpu": 6}, preemption=LOWER)])


def test_preempt_lowest_priority() -> None:
    # TestPreemption "preempt lowest priority".
    h = standalone()
    h.admit("low", "standalone", priority=-1, cpu=2)
    h.admit("mid", "standalone", priority=0, cpu=2)
    h.admit("high", "standalone", priority=1, cpu=2)
    h.clock.advance(1)
    h.submit("in", "standalone", priority=1, cpu=2)
    h.settle()
    assert h.preempts == [("low", "in", "InClusterQueue")]
    assert h.admitted == ["high", "in", "mid"]
    assert h.inadmissible == ["low"]  # paused, back in its queue, not lost


def test_preempt_multiple() -> None:
    # TestPreemption "preempt multiple".
    h = standalone()
    h.admit("low", "standalone", priority=-1, cpu=2)
    h.admit("mid", "standalone", priority=0, cpu=2)
    h.admit("high", "standalone", priority=1, cpu=2)
    h.submit("in", "standalone", priority=1, cpu=3)
    h.settle()
    assert sorted(v for v, _, _ in h.preempts) == ["low", "mid"]


def test_no_preemption_for_low_priority() -> None:
    # TestPreemption "no preemption for low priority".
    h = standalone()
    h.admit("low", "standalone", priority=-1, cpu=3)
    h.admit("mid", "standalone", priority=0, cpu=3)
    h.submit("in", "standalone", priority=-1, cpu=1)
    h.settle()
    assert h.preempts == []
    assert h.inadmissible == ["in"]


def test_minimal_set_excludes_low_priority() -> None:
    # TestPreemption "minimal set excludes low priority": low is removed first, mid makes it
    # fit, then low is added back because the incoming workload still fits without it.
    h = standalone()
    h.admit("low", "standalone", priority=-1, cpu=1)
    h.admit("mid", "standalone", priority=0, cpu=2)
    h.admit("high", "standalone", priority=1, cpu=3)
    h.submit("in", "standalone", priority=1, cpu=2)
    h.settle()
    assert h.preempts == [("mid", "in", "InClusterQueue")]
    assert h.admitted == ["high", "in", "low"]


def test_victims_most_recently_admitted_first_among_equals() -> None:
    # Kueue CandidatesOrdering: same priority -> the most recently admitted goes first.
    h = standalone()
    h.admit("first", "standalone", priority=0, cpu=3)
    h.admit("second", "standalone", priority=0, cpu=3)
    h.submit("in", "standalone", priority=1, cpu=3)
    h.settle()
    assert h.preempts == [("second", "in", "InClusterQueue")]


def test_lower_or_newer_equal_priority() -> None:
    # TestPreemption "preempt newer workloads with the same priority" (ClusterQueue
    # preventStarvation, withinClusterQueue LowerOrNewerEqualPriority): wl2 and wl3 are newer
    # than the incoming workload; wl2 was admitted last, so it goes.
    h = Harness([cq("preventStarvation", {"cpu": 6}, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"})])
    h.clock.set(10)
    h.submit("wl1", "preventStarvation", priority=2, cpu=2)
    h.submit("wl3", "preventStarvation", priority=1, cpu=2)
    h.settle()
    h.clock.set(11)
    h.submit("wl2", "preventStarvation", priority=1, cpu=2, created=10)
    h.settle()
    assert h.admitted == ["wl1", "wl2", "wl3"]
    h.clock.set(20)
    h.submit("in", "preventStarvation", priority=1, cpu=2, created=0)  # older than wl2 and wl3
    h.settle()
    assert h.preempts == [("wl2", "in", "InClusterQueue")]


def test_lower_or_newer_equal_priority_spares_older_equals() -> None:
    # The converse of the case above: an incoming workload newer than every equal is no preemptor.
    h = Harness([cq("preventStarvation", {"cpu": 4}, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"})])
    h.admit("old", "preventStarvation", priority=1, cpu=4)
    h.clock.advance(1)
    h.submit("new", "preventStarvation", priority=1, cpu=2)
    h.settle()
    assert h.preempts == []
    assert h.inadmissible == ["new"]


def test_within_cluster_queue_never() -> None:
    # TestPreemption "can't preempt workloads in ClusterQueue for withinClusterQueue=Never".
    h = Harness([cq("q", {"cpu": 2})])
    h.admit("low", "q", priority=-1, cpu=2)
    h.submit("in", "q", priority=10, cpu=2)
    h.settle()
    assert h.preempts == []


def c1_c2() -> Harness:
    return Harness(
        [
            cq(
                "c1",
                {"cpu": (6, 12, None)},
                cohort="cohort",
                preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
            ),
            cq(
                "c2",
                {"cpu": (6, 12, None)},
                cohort="cohort",
                preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"},
            ),
        ]
    )


def test_reclaim_prefers_another_queues_borrower_over_own_low_priority() -> None:
    # TestPreemption "reclaim quota from borrower": c1 has a low-priority workload of its own,
    # but c2 borrows; the candidate from the other queue goes first (CandidatesOrdering).
    h = c1_c2()
    h.admit("c2-high", "c2", priority=1, cpu=6)
    h.admit("c2-mid", "c2", priority=0, cpu=3)
    h.admit("c1-low", "c1", priority=-1, cpu=3)
    h.submit("in", "c1", priority=1, cpu=3)
    h.settle()
    assert h.preempts == [("c2-mid", "in", "InCohortReclamation")]
    assert h.admitted == ["c1-low", "c2-high", "in"]


def test_reclaim_lower_priority_only_spares_equal_priority_borrowers() -> None:
    # TestPreemption "do not reclaim borrowed quota from same priority for
    # withinCohort=ReclaimFromLowerPriority".
    # Mirror of the case below: c1 reclaims only from lower priorities.
    h = c1_c2()
    h.admit("c2-1", "c2", priority=0, cpu=8)
    h.admit("c1-1", "c1", priority=0, cpu=2)
    h.submit("in", "c1", priority=0, cpu=4)
    h.settle()
    assert h.preempts == []


def test_reclaim_any_takes_equal_priority_borrowers() -> None:
    # TestPreemption "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny".
    # c2 reclaims Any: an equal-priority borrower in c1 is reclaimed once c2 fits its nominal.
    h = c1_c2()
    h.admit("c1-1", "c1", priority=0, cpu=8)
    h.admit("c2-1", "c2", priority=0, cpu=2)
    h.submit("in", "c2", priority=0, cpu=4)
    h.settle()
    assert h.preempts == [("c1-1", "in", "InCohortReclamation")]


def shared_cohort() -> Harness:
    bwc = {"policy": "LowerPriority", "maxPriorityThreshold": 0}
    return Harness(
        [
            cq(
                "a_standard",
                {"cpu": (1, 12, None)},
                cohort="with_shared_cq",
                preemption={
                    "withinClusterQueue": "Never",
                    "reclaimWithinCohort": "LowerPriority",
                    "borrowWithinCohort": bwc,
                },
            ),
            cq(
                "b_standard",
                {"cpu": (1, 12, None)},
                cohort="with_shared_cq",
                preemption={
                    "withinClusterQueue": "LowerPriority",
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": bwc,
                },
            ),
            cq(
                "a_best_effort",
                {"cpu": (1, 12, None)},
                cohort="with_shared_cq",
                preemption={
                    "withinClusterQueue": "Never",
                    "reclaimWithinCohort": "LowerPriority",
                    "borrowWithinCohort": bwc,
                },
            ),
            cq("shared", {"cpu": 10}, cohort="with_shared_cq"),
        ]
    )


def test_borrow_within_cohort_preempts_below_threshold_while_borrowing() -> None:
    # TestPreemption "use BorrowWithinCohort; allow preempting a lower-priority workload from
    # another ClusterQueue while borrowing".
    h = shared_cohort()
    h.admit("a_best_effort_low", "a_best_effort", priority=-1, cpu=10)
    h.submit("in", "a_standard", priority=0, cpu=10)
    h.settle()
    assert h.preempts == [("a_best_effort_low", "in", "InCohortReclaimWhileBorrowing")]
    assert "in" in h.admitted


def test_borrow_within_cohort_spares_above_threshold_when_still_borrowing() -> None:
    # TestPreemption "use BorrowWithinCohort; don't allow preempting a lower-priority workload
    # with priority above MaxPriorityThreshold, if borrowing is required even after the preemption".
    h = shared_cohort()
    h.admit("b_standard", "b_standard", priority=1, cpu=10)
    h.submit("in", "a_standard", priority=2, cpu=10)
    h.settle()
    assert h.preempts == []
    assert h.inadmissible == ["in"]


def test_borrow_within_cohort_above_threshold_when_no_borrowing_after() -> None:
    # TestPreemption "use BorrowWithinCohort; allow preempting a lower-priority workload with
    # priority above MaxPriorityThreshold, if borrowing is not required after the preemption".
    h = shared_cohort()
    h.admit("b_standard", "b_standard", priority=1, cpu=13)
    h.submit("in", "a_standard", priority=2, cpu=1)
    h.settle()
    assert h.preempts == [("b_standard", "in", "InCohortReclamation")]


def test_reclaim_quota_from_lender() -> None:
    # TestPreemption "reclaim quota from lender" (lend1: 6 with lendingLimit 4; lend2: 6 with 2).
    pre = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    h = Harness(
        [
            cq("lend1", {"cpu": (6, None, 4)}, cohort="cohort-lend", preemption=pre),
            cq("lend2", {"cpu": (6, None, 2)}, cohort="cohort-lend", preemption=pre),
        ]
    )
    h.admit("lend2-high", "lend2", priority=1, cpu=4)
    h.admit("lend2-mid", "lend2", priority=0, cpu=3)
    h.admit("lend1-low", "lend1", priority=-1, cpu=3)
    h.submit("in", "lend1", priority=1, cpu=3)
    h.settle()
    assert [v for v, _, _ in h.preempts] == ["lend2-mid"]


def test_preempted_workload_is_readmitted_when_quota_returns() -> None:
    h = standalone()
    h.admit("low", "standalone", priority=-1, cpu=6)
    h.submit("in", "standalone", priority=1, cpu=6)
    h.settle()
    assert h.admits == ["low", "in"]
    h.ctl.finish("in")
    h.settle()
    assert h.admits == ["low", "in", "low"]
