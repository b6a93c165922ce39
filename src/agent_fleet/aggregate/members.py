"""A cluster as one result: its representative, with every other member kept beside it.

A representative carries, besides its own fields:

* ``duplicates``: the other members' ids;
* ``occurrences``: one entry per other member — its id, session, partition, location, confidence, its
  similarity to the representative and whether it is an exact duplicate — and, where its text differs
  from the representative's (beyond case, punctuation and spacing), its own ``title`` and ``body``;
* ``corroborated_by``: how many distinct sessions reported the result (1 when one session did);
* ``duplicate_similarity`` and ``duplicate_locations``: the similarity of each member and the other
  places, as before ``occurrences`` carried them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agent_fleet.aggregate.final_pass import Clusters
from agent_fleet.domain.results import ResultItem

__all__ = ["corroboration", "representatives"]


def corroboration(item: ResultItem) -> int:
    """How many distinct sessions reported a result (``corroborated_by``; 1 for a result alone)."""
    k = item.extra.get("corroborated_by")
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1


def representatives(items: Sequence[ResultItem], hashes: Sequence[str], cl: Clusters) -> list[ResultItem]:
    """The leaders of ``cl`` in arrival order, each with its members (module docstring); ``hashes``:
    each result's normalised-text hash (a member whose hash is its leader's says it in the same words)."""
    members: dict[int, list[int]] = {}
    for i, leader in enumerate(cl.leader):
        if leader != i:
            members.setdefault(leader, []).append(i)
    reps = []
    for i, item in enumerate(items):
        if cl.leader[i] != i:
            continue
        mem = sorted(members.get(i, []), key=lambda m: (-cl.similarity[m], m))
        extra = dict(item.extra)
        extra["duplicate_similarity"] = {items[m].id: round(cl.similarity[m], 4) for m in mem}
        locations = sorted({loc for m in mem if (loc := items[m].location) and loc != item.location})
        if locations:
            extra["duplicate_locations"] = locations
        if mem:
            extra["occurrences"] = [_occurrence(items[m], cl, m, differs=hashes[m] != hashes[i]) for m in mem]
        extra["corroborated_by"] = len({item.session_id, *(items[m].session_id for m in mem)})
        reps.append(replace(item, duplicates=tuple(items[m].id for m in mem), extra=extra))
    return reps


def _occurrence(it: ResultItem, cl: Clusters, m: int, *, differs: bool) -> dict[str, Any]:
    """Where a merged result was found, as it was reported (its words too, where they differ)."""
    occ: dict[str, Any] = {
        "id": it.id,
        "session_id": it.session_id,
        "partition_id": it.partition_id,
        "location": it.location,
        "confidence": it.confidence,
        "similarity": round(cl.similarity[m], 4),
        "exact": cl.exact_of[m] is not None,
    }
    if differs:
        occ["title"] = it.title
        occ["body"] = it.body
    return occ
