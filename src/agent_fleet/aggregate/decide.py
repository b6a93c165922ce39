"""The greedy leader rule over a batch, from its pairs at the threshold.

A batch of ``b`` vectors (sequence numbers ``first_seq`` … ``first_seq + b - 1``) arrives with every
pair ``(i, member, sim)`` an index found: ``i`` a batch position, ``member`` the sequence number of
an earlier vector (an existing leader, or an earlier vector of the same batch) and ``sim`` at or
above the threshold. The rule, one vector at a time: ``i`` joins its most similar earlier *leader*,
else it leads. A pair with an existing leader decides ``i`` at once; a pair with an earlier batch
vector counts only if that vector turns out to lead.

:func:`decide_batch` settles this without a Python step per vector: each round decides every
vector whose earlier batch partners are all decided (the earliest undecided vector always is, so a
round never stalls), which takes as many rounds as the longest chain of batch partners — a few on
real data. Past ``max_rounds`` the rest is settled one at a time, in order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["decide_batch"]

_UNKNOWN, _JOINS, _LEADS = -1, 0, 1


def decide_batch(
    b: int, first_seq: int, pi: np.ndarray, pm: np.ndarray, ps: np.ndarray, *, max_rounds: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """The leader's sequence number and the similarity to it for each of the ``b`` vectors; a vector
    that leads has itself as leader and similarity 1.0. Ties go to the earlier leader."""
    if not len(pi):  # no pair: every vector leads
        return np.arange(first_seq, first_seq + b, dtype=np.int64), np.ones(b, dtype=np.float64)
    local = pm >= first_seq  # the partner is in this batch
    li, lj = pi[local], pm[local] - first_seq
    state = np.full(b, _LEADS, dtype=np.int8)
    state[li] = _UNKNOWN
    state[pi[~local]] = _JOINS  # an existing leader at the threshold settles it
    rounds = 0
    while rounds < max_rounds:
        sel = state[li] == _UNKNOWN
        if not sel.any():
            break
        qi, sj = li[sel], state[lj[sel]]
        joins = np.zeros(b, dtype=bool)
        joins[qi[sj == _LEADS]] = True
        waits = np.zeros(b, dtype=bool)
        waits[qi[sj == _UNKNOWN]] = True
        unknown = state == _UNKNOWN
        state[unknown & joins] = _JOINS
        state[unknown & ~joins & ~waits] = _LEADS
        rounds += 1
    if (state == _UNKNOWN).any():
        _settle_in_order(state, li, lj)
    return _leaders(b, first_seq, state, pi, pm, ps)


def _settle_in_order(state: np.ndarray, li: np.ndarray, lj: np.ndarray) -> None:
    order = np.argsort(li, kind="stable")
    li, lj = li[order], lj[order]
    todo = np.nonzero(state == _UNKNOWN)[0]
    starts = np.searchsorted(li, todo, side="left")
    ends = np.searchsorted(li, todo, side="right")
    for i, a, e in zip(todo.tolist(), starts.tolist(), ends.tolist(), strict=True):
        state[i] = _JOINS if (state[lj[a:e]] == _LEADS).any() else _LEADS


def _leaders(
    b: int, first_seq: int, state: np.ndarray, pi: np.ndarray, pm: np.ndarray, ps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    seq = first_seq + np.arange(b, dtype=np.int64)
    leader = seq.copy()
    sim = np.ones(b, dtype=np.float64)
    local = pm >= first_seq
    ok = ~local
    ok[local] = state[pm[local] - first_seq] == _LEADS
    ok &= state[pi] == _JOINS
    qi, qm, qs = pi[ok], pm[ok], ps[ok]
    if len(qi):
        # per vector: the highest similarity, then the earliest leader
        order = np.lexsort((qm, -qs.astype(np.float64), qi))
        qi, qm, qs = qi[order], qm[order], qs[order]
        first = np.ones(len(qi), dtype=bool)
        first[1:] = qi[1:] != qi[:-1]
        leader[qi[first]] = qm[first]
        sim[qi[first]] = qs[first]
    return leader, sim
