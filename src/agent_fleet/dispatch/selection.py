"""Choosing workers: least-loaded, capability-weighted, and team formation.

Pure functions over :class:`Candidate` snapshots; the pool decides who is a candidate (alive,
breaker closed or probing, not draining) and these decide among them. Every choice breaks ties by
worker id, so the same snapshot always gives the same answer.

* **Least-loaded** picks the lowest utilisation ``load / max_load``.
* **Capability-weighted** keeps only workers that have every required skill, then lets the deepest
  expertise (mean skill level over the required skills) win among those whose load is at most
  ``load_slack`` sessions above the least-loaded eligible worker: expertise beats load, up to a
  bound.
* **Team formation** returns the smallest set of workers whose skills together cover every required
  capability, with no member whose skills the others already cover. The search is exact (smallest
  cardinality, then lowest total load) while the number of distinct skill signatures is at most
  ``exact_limit``; past that it is greedy set cover (ln n approximation) with redundant members
  pruned afterwards.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Candidate", "capability_weighted", "expertise", "form_team", "least_loaded"]


@dataclass(frozen=True, slots=True)
class Candidate:
    worker_id: str
    load: int
    max_load: int
    skills: Mapping[str, float] = field(default_factory=dict)  # skill -> depth (> 0)

    @property
    def free(self) -> int:
        return self.max_load - self.load

    @property
    def utilization(self) -> float:
        return self.load / self.max_load if self.max_load > 0 else 1.0


def expertise(c: Candidate, required: Collection[str]) -> float:
    """Mean skill depth over ``required``; 0 when any required skill is missing."""
    if not required:
        return 0.0
    depths = [c.skills.get(s, 0.0) for s in required]
    return 0.0 if min(depths) <= 0 else sum(depths) / len(depths)


def least_loaded(candidates: Iterable[Candidate]) -> Candidate | None:
    free = [c for c in candidates if c.free > 0]
    return min(free, key=lambda c: (c.utilization, c.load, c.worker_id), default=None)


def capability_weighted(
    candidates: Iterable[Candidate], required: Collection[str], *, load_slack: int = 2
) -> Candidate | None:
    if load_slack < 0:
        raise ValueError("load_slack must be >= 0")
    if not required:
        return least_loaded(candidates)
    eligible = [c for c in candidates if c.free > 0 and expertise(c, required) > 0]
    if not eligible:
        return None
    floor = min(c.load for c in eligible)
    near = [c for c in eligible if c.load <= floor + load_slack]
    return min(near, key=lambda c: (-expertise(c, required), c.load, c.worker_id))


def form_team(
    candidates: Iterable[Candidate], required: Collection[str], *, exact_limit: int = 16
) -> tuple[Candidate, ...] | None:
    """Smallest non-redundant set of workers covering ``required``; None if no cover exists."""
    need = frozenset(required)
    if not need:
        return ()
    # One representative per skill signature: the least-loaded worker with that coverage. Two
    # workers with the same coverage are interchangeable for the cover; the lighter one wins.
    best: dict[frozenset[str], Candidate] = {}
    for c in candidates:
        if c.free <= 0:
            continue
        cover = need & {s for s, d in c.skills.items() if d > 0}
        if not cover:
            continue
        cur = best.get(cover)
        if cur is None or (c.load, c.worker_id) < (cur.load, cur.worker_id):
            best[cover] = c
    if not best or frozenset().union(*best) != need:
        return None
    reps = sorted(best.items(), key=lambda kv: (-len(kv[0]), kv[1].load, kv[1].worker_id))
    if len(reps) <= exact_limit:
        return _exact(reps, need)
    return _greedy(reps, need)


def _key(team: Sequence[Candidate]) -> tuple[int, int, tuple[str, ...]]:
    return (len(team), sum(c.load for c in team), tuple(sorted(c.worker_id for c in team)))


def _exact(reps: list[tuple[frozenset[str], Candidate]], need: frozenset[str]) -> tuple[Candidate, ...]:
    for size in range(1, len(reps) + 1):
        found: list[tuple[Candidate, ...]] = []
        for combo in itertools.combinations(reps, size):
            if frozenset().union(*(cov for cov, _ in combo)) == need:
                found.append(tuple(c for _, c in combo))
        if found:
            team = min(found, key=_key)
            return tuple(sorted(team, key=lambda c: c.worker_id))
    raise AssertionError("unreachable: coverage was checked")  # pragma: no cover


def _greedy(reps: list[tuple[frozenset[str], Candidate]], need: frozenset[str]) -> tuple[Candidate, ...]:
    chosen: list[tuple[frozenset[str], Candidate]] = []
    covered: frozenset[str] = frozenset()
    while covered != need:
        cov, cand = min(
            (r for r in reps if r[0] - covered),
            key=lambda r: (-len(r[0] - covered), r[1].load, r[1].worker_id),
        )
        chosen.append((cov, cand))
        covered |= cov
    # Prune members the rest already cover, heaviest first, so the result has no redundancy.
    for item in sorted(chosen, key=lambda r: (-r[1].load, r[1].worker_id)):
        rest = [r for r in chosen if r is not item]
        if rest and frozenset().union(*(r[0] for r in rest)) == need:
            chosen = rest
    return tuple(sorted((c for _, c in chosen), key=lambda c: c.worker_id))
