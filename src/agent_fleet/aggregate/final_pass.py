"""The final pass of :class:`~agent_fleet.aggregate.aggregator.Aggregator`, over its per-result lists.

It runs in two steps so that the aggregator can embed in between only what the second one reads:

1. :func:`plan_final` (no vectors): each result's exact-duplicate group and the group's head (its
   best-ranked member, which stands for it), and each scope's heads in rank order;
2. :func:`cluster_final`: the greedy leader rule over each scope's heads in that order, then every
   other member of an exact group follows its head. A scope with a single head needs no index and
   no vector: that head leads itself. A scope whose heads are those of the last pass, in the same
   order, keeps that pass (a run passes once while its last sessions run, then once at the end).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_fleet.aggregate.index import Assignment, LeaderIndex
from agent_fleet.aggregate.text import rank_key
from agent_fleet.aggregate.vectors import Vector
from agent_fleet.domain.results import ResultItem

__all__ = ["Clusters", "FinalPlan", "ScopePasses", "cluster_final", "plan_final"]

ScopePasses = dict[str, tuple[tuple[int, ...], list[Assignment]]]  # scope key -> (its heads, their pass)


@dataclass(slots=True)
class Clusters:
    """Leader (arrival index) of every result and its similarity to it."""

    leader: list[int]
    similarity: list[float]
    exact_of: list[int | None]


@dataclass(frozen=True, slots=True)
class FinalPlan:
    head_of: list[int]  # each result's exact-group head (itself for a head)
    by_scope: dict[str, list[int]]  # scope key -> its heads, best first

    def compared(self) -> list[int]:
        """The heads whose vectors the pass reads: those of every scope with two heads or more."""
        return [i for heads in self.by_scope.values() if len(heads) > 1 for i in heads]


def _exact_groups(keys: Sequence[str], raws: Sequence[str]) -> list[int]:
    """Each result's exact-duplicate group (a representative index): same normalised text within
    one scope key, or byte-identical text anywhere."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for column in (keys, raws):
        first: dict[str, int] = {}
        for i, k in enumerate(column):
            j = first.setdefault(k, i)
            if j != i:
                parent[find(i)] = find(j)
    return [find(i) for i in range(len(parent))]


def plan_final(
    items: Sequence[ResultItem], keys: Sequence[str], raws: Sequence[str], scopes: Sequence[str]
) -> FinalPlan:
    """``keys``: each result's exact-duplicate key within its scope; ``raws``: the hash of its text as
    written; ``scopes``: its scope key."""
    n = len(items)
    # "Earliest" is by result id (session, then submission), not by arrival: streamed results
    # arrive in a different order on every run, and a resumed run must keep the same versions.
    earliest = {i: rank for rank, i in enumerate(sorted(range(n), key=lambda i: items[i].id))}
    ranks = [rank_key(it, earliest[i]) for i, it in enumerate(items)]
    groups = _exact_groups(keys, raws)
    # The best member of each exact group stands for the group.
    head: dict[int, int] = {}
    for i in sorted(range(n), key=ranks.__getitem__):
        head.setdefault(groups[i], i)
    by_scope: dict[str, list[int]] = {}
    for i in sorted(head.values(), key=ranks.__getitem__):
        by_scope.setdefault(scopes[i], []).append(i)
    return FinalPlan([head[g] for g in groups], by_scope)


def cluster_final(
    plan: FinalPlan,
    vector: Callable[[int], Vector],
    new_index: Callable[[], LeaderIndex],
    kept: ScopePasses | None = None,
) -> Clusters:
    """The clusters of the plan; ``vector(i)``: result ``i``'s vector (asked for compared heads only).
    ``kept``: each scope's last pass, by its heads; a scope whose heads are the same, in the same
    order, takes it as it is, and the others' passes are kept there for the next time."""
    n = len(plan.head_of)
    cl = Clusters(list(range(n)), [1.0] * n, [None] * n)
    kept = {} if kept is None else kept
    for scope, order in plan.by_scope.items():
        if len(order) == 1:
            continue  # alone in its scope: it leads itself, as the clusters start
        heads = tuple(order)
        last = kept.get(scope)
        if last is not None and last[0] == heads:
            assigned = last[1]
        else:
            assigned = new_index().assign([vector(i) for i in order])
            kept[scope] = (heads, assigned)
        for pos, a in enumerate(assigned):
            i = order[pos]
            cl.leader[i] = order[a.leader]
            cl.similarity[i] = a.similarity if a.leader != pos else 1.0
    for i, h_head in enumerate(plan.head_of):
        if h_head != i:
            cl.leader[i] = cl.leader[h_head]
            cl.similarity[i] = cl.similarity[h_head]
            cl.exact_of[i] = h_head
    return cl
