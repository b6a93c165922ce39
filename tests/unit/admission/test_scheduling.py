"""The scheduling cycle on a virtual clock: quota arithmetic as seen by admission, queueing
strategies, and the one-head-per-queue cycle. Expected values come from Kueue's tests and
docs, named in each test."""

from __future__ import annotations

from admission_builders import Harness, cq, lq


def test_borrowing_limit_caps_below_what_the_cohort_has_free() -> None:
    # Kueue docs, concepts/cluster_queue "BorrowingLimit": a queue may use at most
    # nominalQuota + borrowingLimit even when the cohort has more unused quota.
    h = Harness([cq("a", {"cpu": (2, 3, None)}, cohort="c"), cq("b", {"cpu": 10}, cohort="c")])
    h.admit("a1", "a", cpu=5)  # 2 nominal + 3 borrowed
    h.submit("a2", "a", cpu=1)
    h.settle()
    assert h.admitted == ["a1"]
    assert h.inadmissible == ["a2"]  # the cohort still has 7 free, the limit says no
    h.admit("b1", "b", cpu=7)


def test_lending_limit_shrinks_what_others_may_borrow() -> None:
    # Kueue scheduler_test "workload exceeds lending limit when borrow in cohort":
    # only lendingLimit of a lender's nominal quota is visible to the cohort.
    h = Harness([cq("a", {"cpu": (2, None, None)}, cohort="c"), cq("b", {"cpu": (10, None, 4)}, cohort="c")])
    h.submit("a-big", "a", cpu=7)  # 2 own + 4 lendable < 7
    h.submit("a-ok", "a", cpu=6, created=1)
    h.settle()
    assert h.admitted == ["a-ok"]
    assert h.inadmissible == ["a-big"]
    # What b keeps for itself (10 - 4 = 6) is still b's.
    h.admit("b1", "b", cpu=6)


def test_two_heads_in_one_cycle_second_no_longer_fits() -> None:
    # Kueue scheduler_test "cannot borrow if cohort was assigned and would result in
    # overadmission": both heads fit the snapshot; the first one processed takes the quota,
    # the second no longer fits, is skipped and stays active (FailedAfterNomination).
    h = Harness([cq("a", {"cpu": 5}, cohort="c"), cq("b", {"cpu": 5}, cohort="c")])
    h.submit("a1", "a", cpu=6, priority=1, created=0)
    h.submit("b1", "b", cpu=6, priority=0, created=0)
    result = h.ctl.run_cycle()
    assert [a.workload.name for a in result.admitted] == ["a1"]
    (skipped,) = result.requeued
    assert skipped.workload.name == "b1" and not skipped.inadmissible
    assert h.active == ["b1"]
    # On its own next cycle it is evaluated against the new usage and parked.
    h.settle()
    assert h.inadmissible == ["b1"]


def test_strict_fifo_head_blocks_its_queue() -> None:
    # Kueue cluster_queue_test TestStrictFIFO / docs "StrictFIFO": an older workload that
    # cannot be admitted blocks newer ones even when they fit.
    h = Harness([cq("q", {"cpu": 4}, strategy="StrictFIFO")])
    h.admit("running", "q", cpu=3)
    h.submit("big", "q", cpu=2, created=10)
    h.submit("small", "q", cpu=1, created=11)
    h.settle()
    assert h.admitted == ["running"]
    assert h.active == ["big", "small"]
    assert h.inadmissible == []


def test_best_effort_fifo_passes_a_blocked_head() -> None:
    # Same trace as above with BestEffortFIFO (docs "BestEffortFIFO"): the head is parked
    # as inadmissible and the next workload is admitted.
    h = Harness([cq("q", {"cpu": 4}, strategy="BestEffortFIFO")])
    h.admit("running", "q", cpu=3)
    h.submit("big", "q", cpu=2, created=10)
    h.submit("small", "q", cpu=1, created=11)
    h.settle()
    assert h.admitted == ["running", "small"]
    assert h.inadmissible == ["big"]


def test_parked_workloads_return_when_quota_is_freed_in_their_cohort_tree() -> None:
    # Kueue QueueAssociatedInadmissibleWorkloadsAfter: a finished workload requeues the
    # inadmissible workloads of every ClusterQueue under its root cohort.
    h = Harness([cq("a", {"cpu": 2}, cohort="c"), cq("b", {"cpu": 2}, cohort="c"), cq("solo", {"cpu": 1})])
    h.admit("b1", "b", cpu=4)
    h.submit("a1", "a", cpu=2)
    h.submit("s1", "solo", cpu=2)
    h.settle()
    assert h.inadmissible == ["a1", "s1"]
    h.ctl.finish("b1")
    assert h.active == ["a1"]  # woken; solo is in another tree
    h.settle()
    assert h.admitted == ["a1"]
    assert h.inadmissible == ["s1"]


def test_pods_is_the_concurrent_agent_cap() -> None:
    # Kueue flavorassigner: a podset counts its pods where the ClusterQueue covers "pods".
    h = Harness([cq("q", {"pods": 2})])
    for i in range(3):
        h.submit(f"s{i}", "q", created=i)
    h.settle()
    assert h.admitted == ["s0", "s1"]
    assert h.inadmissible == ["s2"]
    h.ctl.finish("s0")
    h.settle()
    assert h.admitted == ["s1", "s2"]


def test_pods_request_counts_only_where_covered_and_uncovered_resource_does_not_fit() -> None:
    # Kueue flavorassigner: pods only where covered; any other resource the ClusterQueue
    # does not cover has no flavor (NoMatchingFlavor).
    h = Harness([cq("q", {"cpu": 4})])
    h.submit("with-pods", "q", cpu=1, pods=5)
    h.submit("tokens", "q", cpu=1, **{"example.com/tokens-per-min": 100})
    h.settle()
    assert h.admitted == ["with-pods"]
    assert h.inadmissible == ["tokens"]
    assert h.ctl.workloads["tokens"].last_reason == "NoMatchingFlavor"


def test_custom_resource_bounds_a_downstream_system() -> None:
    h = Harness([cq("q", {"pods": 10, "ci-runners": 3})])
    h.submit("a", "q", **{"ci-runners": 2})
    h.submit("b", "q", created=1, **{"ci-runners": 2})
    h.submit("c", "q", created=2, **{"ci-runners": 1})
    h.settle()
    assert h.admitted == ["a", "c"]


def test_exceeds_max_quota_is_refused_at_once() -> None:
    # Kueue flavorassigner: request > PotentialAvailable is NoFit, reason ExceedsMaxQuota.
    h = Harness([cq("a", {"cpu": (2, 1, None)}, cohort="c"), cq("b", {"cpu": 5}, cohort="c")])
    from agent_fleet.admission import Workload

    assert h.ctl.submit(Workload(name="huge", queue="a", requests={"cpu": 4})) == "ExceedsMaxQuota"
    assert h.ctl.submit(Workload(name="ok", queue="a", requests={"cpu": 3})) is None
    h.settle()
    assert h.admitted == ["ok"]
    assert h.inadmissible == ["huge"]
    assert h.ctl.workloads["huge"].last_reason == "ExceedsMaxQuota"


def test_order_within_a_queue_is_priority_then_creation_time() -> None:
    h = Harness([cq("q", {"cpu": 1}, strategy="StrictFIFO")])
    h.submit("old-low", "q", cpu=1, priority=0, created=0)
    h.submit("new-high", "q", cpu=1, priority=5, created=9)
    h.submit("mid-high", "q", cpu=1, priority=5, created=3)
    h.settle()
    assert h.admitted == ["mid-high"]
    h.ctl.finish("mid-high")
    h.settle()
    assert h.admitted == ["new-high"]


def test_heads_across_queues_non_borrowing_first_then_priority() -> None:
    # Kueue scheduler classical iterator: entries under nominal quota first, then priority.
    h = Harness([cq("a", {"cpu": 2}, cohort="c"), cq("b", {"cpu": 2}, cohort="c")])
    h.submit("a-borrow", "a", cpu=3, priority=10, created=0)
    h.submit("b-own", "b", cpu=2, priority=0, created=5)
    result = h.ctl.run_cycle()
    assert [a.workload.name for a in result.admitted] == ["b-own"]
    assert "a-borrow" in h.active


def test_namespace_selector_mismatch_is_inadmissible_even_in_strict_fifo() -> None:
    # Kueue scheduler_test "failed to match clusterQueue selector" and StrictFIFO's
    # exception for NamespaceMismatch.
    objs = [
        cq("sales", {"cpu": 4}, selector={"matchLabels": {"dep": "sales"}}, strategy="StrictFIFO"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "eng", "labels": {"dep": "eng"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"dep": "sales"}}},
        lq("q", "sales", namespace="eng"),
        lq("q", "sales", namespace="shop"),
    ]
    h = Harness(objs)
    h.submit("eng-1", "eng/q", cpu=1, created=0)
    h.submit("shop-1", "shop/q", cpu=1, created=1)
    h.settle()
    assert h.admitted == ["shop-1"]
    assert h.inadmissible == ["eng-1"]


def test_hierarchical_cohort_quota_is_shared_by_its_subtree() -> None:
    # Kueue resource_node.go and docs concepts/cohort: a Cohort's own nominalQuota is a
    # shared pool for the ClusterQueues below it; a parent's borrowingLimit caps the subtree.
    objs = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "root"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 10}]}],
                    }
                ]
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "team"},
            "spec": {
                "parentName": "root",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 0, "borrowingLimit": 4}]}
                        ],
                    }
                ],
            },
        },
        cq("x", {"cpu": 2}, cohort="team"),
        cq("y", {"cpu": 0}, cohort="root"),
    ]
    h = Harness(objs)
    h.admit("x1", "x", cpu=6)  # 2 own + 4 from the root pool (team's borrowing limit)
    h.submit("x2", "x", cpu=1)
    h.settle()
    assert h.inadmissible == ["x2"]
    h.admit("y1", "y", cpu=6)  # what is left of the root pool
    h.submit("y2", "y", cpu=1)
    h.settle()
    assert h.inadmissible == ["x2", "y2"]
