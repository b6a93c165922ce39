"""Flavor fungibility, as Kueue's pkg/scheduler/flavorassigner decides it (shouldTryNextFlavor,
isPreferred; TestAssignFlavors' fungibility cases): flavors are tried in order; a flavor that
fits without borrowing ends the search; one that needs borrowing ends it unless
``whenCanBorrow: TryNextFlavor``; one that needs preemption (with candidates) ends it only with
``whenCanPreempt: MayStopSearch``; among the flavors tried, ``preference`` picks borrowing over
preemption (the default) or the reverse, and a flavor whose preemption finds no candidates never
beats one that can be admitted."""

from __future__ import annotations

from typing import Any

from admission_builders import Harness, cq, flavor, group

# Two flavors of cpu: "a" (ClusterQueue "q" holds 2, borrowing up to 10 from "lender") then "b" (4).
QUOTAS = {"a": {"cpu": (2, 10, None)}, "b": {"cpu": (4, 0, None)}}


def harness(fungibility: dict[str, Any] | None, *, within: str = "LowerPriority") -> Harness:
    return Harness(
        [
            flavor("a"),
            flavor("b"),
            cq(
                "q",
                {},
                cohort="co",
                groups=[group(QUOTAS)],
                fungibility=fungibility,
                preemption={"withinClusterQueue": within},
            ),
            cq("lender", {}, cohort="co", groups=[group({"a": {"cpu": 10}, "b": {"cpu": 0}})]),
        ]
    )


def flavor_of(h: Harness, name: str) -> str | None:
    for cycle in h.ctl.settle():
        for adm in cycle.admitted:
            if adm.workload.name == name:
                return adm.flavors["cpu"]
    return None


def test_default_stops_at_the_first_flavor_that_fits_even_when_borrowing() -> None:
    h = harness(None)
    h.submit("w", "q", cpu=3)  # a: 2 own + 1 borrowed; b would fit without borrowing
    assert flavor_of(h, "w") == "a"


def test_when_can_borrow_try_next_flavor_prefers_a_flavor_without_borrowing() -> None:
    h = harness({"whenCanBorrow": "TryNextFlavor"})
    h.submit("w", "q", cpu=3)
    assert flavor_of(h, "w") == "b"


def test_when_can_borrow_try_next_flavor_keeps_the_borrowing_flavor_if_nothing_better() -> None:
    h = harness({"whenCanBorrow": "TryNextFlavor"})
    h.submit("w", "q", cpu=5)  # b holds 4: only a, borrowing, can take it
    assert flavor_of(h, "w") == "a"


def fill_a_with_low_priority(h: Harness) -> None:
    # q's own share of flavor a is used by a low-priority workload; the lender uses all of its own.
    h.reserve("low", "q", flavor_name="a", priority=-1, cpu=2)
    h.reserve("lend", "lender", flavor_name="a", cpu=10)


def test_default_tries_the_next_flavor_rather_than_preempt() -> None:
    h = harness(None)
    fill_a_with_low_priority(h)
    h.submit("w", "q", cpu=2)
    assert flavor_of(h, "w") == "b"
    assert h.preempts == []


def test_when_can_preempt_may_stop_search_preempts_in_the_first_flavor() -> None:
    h = harness({"whenCanPreempt": "MayStopSearch"})
    fill_a_with_low_priority(h)
    h.submit("w", "q", cpu=2)
    h.settle()
    assert h.preempts == [("low", "w", "InClusterQueue")]
    assert "w" in h.admitted


def test_v1beta1_spellings_borrow_and_preempt_stop_the_search() -> None:
    h = harness({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"})
    fill_a_with_low_priority(h)
    h.submit("w", "q", cpu=2)
    h.settle()
    assert h.preempts == [("low", "w", "InClusterQueue")]


def test_preference_preemption_over_borrowing() -> None:
    # a needs preemption within q's own quota (borrowing level 0); b fits only by borrowing.
    quotas = {"a": {"cpu": (2, 10, None)}, "b": {"cpu": (0, 10, None)}}
    objects = [
        flavor("a"),
        flavor("b"),
        cq(
            "q",
            {},
            cohort="co",
            groups=[group(quotas)],
            fungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            },
            preemption={"withinClusterQueue": "LowerPriority"},
        ),
        cq("lender", {}, cohort="co", groups=[group({"a": {"cpu": 0}, "b": {"cpu": 10}})]),
    ]
    h = Harness(objects)
    h.reserve("low", "q", flavor_name="a", priority=-1, cpu=2)
    h.submit("w", "q", cpu=2)
    h.settle()
    assert h.preempts == [("low", "w", "InClusterQueue")]

    # The same with the default preference borrows flavor b instead.
    objects[2]["spec"]["flavorFungibility"]["preference"] = "BorrowingOverPreemption"
    h = Harness(objects)
    h.reserve("low", "q", flavor_name="a", priority=-1, cpu=2)
    h.submit("w", "q", cpu=2)
    assert flavor_of(h, "w") == "b"
    assert h.preempts == []


def test_a_flavor_without_preemption_candidates_never_beats_one_that_fits() -> None:
    # Kueue #13903: a has room only by preempting, and nothing may be preempted (within Never);
    # b fits by borrowing. Whatever the preference, b is chosen and w is admitted.
    quotas = {"a": {"cpu": (2, 10, None)}, "b": {"cpu": (0, 10, None)}}
    h = Harness(
        [
            flavor("a"),
            flavor("b"),
            cq(
                "q",
                {},
                cohort="co",
                groups=[group(quotas)],
                fungibility={
                    "whenCanBorrow": "TryNextFlavor",
                    "whenCanPreempt": "TryNextFlavor",
                    "preference": "PreemptionOverBorrowing",
                },
            ),
            cq("lender", {}, cohort="co", groups=[group({"a": {"cpu": 0}, "b": {"cpu": 10}})]),
        ]
    )
    h.reserve("low", "q", flavor_name="a", priority=-1, cpu=2)
    h.submit("w", "q", cpu=2)
    assert flavor_of(h, "w") == "b"
