from __future__ import annotations

import itertools

import pytest

from agent_fleet.dispatch.selection import Candidate, capability_weighted, expertise, form_team, least_loaded


def c(wid: str, load: int, max_load: int = 4, **skills: float) -> Candidate:
    return Candidate(wid, load, max_load, skills)


def test_least_loaded_uses_utilization_then_id() -> None:
    cands = [c("a", 2, 4), c("b", 1, 1), c("c", 1, 4), c("d", 1, 4)]
    assert least_loaded(cands) == cands[2]  # 0.25 beats 0.5; b is full; c < d by id
    assert least_loaded([c("x", 3, 3)]) is None
    assert least_loaded([]) is None


def test_expertise_is_mean_depth_and_zero_when_a_skill_is_missing() -> None:
    assert expertise(c("a", 0, python=3, sql=1), ["python", "sql"]) == 2.0
    assert expertise(c("a", 0, python=3), ["python", "sql"]) == 0.0
    assert expertise(c("a", 0, python=3), []) == 0.0


@pytest.mark.parametrize(
    ("slack", "loads", "expected"),
    [
        # deep expert (depth 5) at load 2, novice (depth 1) at load 0
        (2, (2, 0), "deep"),  # within the slack: expertise wins
        (1, (2, 0), "novice"),  # past the slack: load wins
        (0, (0, 0), "deep"),
        (0, (1, 0), "novice"),
        (3, (3, 3), "deep"),
    ],
)
def test_capability_weighted_trades_expertise_for_load_up_to_a_bound(
    slack: int, loads: tuple[int, int], expected: str
) -> None:
    cands = [c("deep", loads[0], 8, python=5), c("novice", loads[1], 8, python=1), c("none", 0, 8, go=5)]
    pick = capability_weighted(cands, ["python"], load_slack=slack)
    assert pick is not None and pick.worker_id == expected


def test_capability_weighted_needs_every_skill_and_free_slot() -> None:
    cands = [c("a", 0, 1, python=5), c("b", 4, 4, python=5, sql=5), c("d", 1, 4, python=2, sql=1)]
    pick = capability_weighted(cands, ["python", "sql"])
    assert pick is not None and pick.worker_id == "d"  # b is full, a lacks sql
    assert capability_weighted(cands, ["rust"]) is None
    assert capability_weighted(cands, []) == least_loaded(cands)


def test_team_is_smallest_cover_without_redundancy() -> None:
    cands = [
        c("w1", 0, py=1),
        c("w2", 0, sql=1),
        c("w3", 0, ui=1),
        c("w4", 1, py=1, sql=1),
        c("w5", 2, sql=1, ui=1),
        c("w6", 0, py=1, sql=1, ui=1, ops=1),
    ]
    team = form_team(cands, ["py", "sql", "ui"])
    assert team is not None and [t.worker_id for t in team] == ["w6"]
    team = form_team(cands[:5], ["py", "sql", "ui"])
    # size-2 covers: w4+w3 (load 1), w1+w5 (load 2), w4+w5 (load 3) -> lightest
    assert team is not None and [t.worker_id for t in team] == ["w3", "w4"]
    assert form_team(cands[:3], ["py", "sql", "rust"]) is None
    assert form_team(cands, []) == ()


def test_team_skips_full_workers() -> None:
    cands = [c("all", 4, 4, py=1, sql=1), c("p", 0, py=1), c("s", 0, sql=1)]
    team = form_team(cands, ["py", "sql"])
    assert team is not None and [t.worker_id for t in team] == ["p", "s"]


def _brute_min(cands: list[Candidate], need: set[str]) -> int:
    for k in range(1, len(cands) + 1):
        for combo in itertools.combinations(cands, k):
            if need <= {s for x in combo for s in x.skills}:
                return k
    return 0


def test_greedy_team_covers_without_redundancy_past_exact_limit() -> None:
    skills = [f"s{i}" for i in range(8)]
    cands = [
        c(f"w{i:02d}", i % 3, **{s: 1.0 for j, s in enumerate(skills) if (i >> (j % 5)) & 1 or j == i % 8})
        for i in range(24)
    ]
    need = set(skills)
    team = form_team(cands, need, exact_limit=2)
    assert team is not None
    covered = {s for t in team for s in t.skills} & need
    assert covered == need
    for member in team:  # no redundancy
        rest = {s for t in team if t is not member for s in t.skills} & need
        assert rest != need
    exact = form_team(cands, need)
    assert exact is not None and len(exact) == _brute_min(cands, need)
