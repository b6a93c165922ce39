"""The accounts a run's calls are charged to beside their session's and the gateway's run account: its
LocalQueue (fleet.yaml ``budgets.queue_usd``) and its team (``teams.NAME.budget_usd``).

A run is assigned its groups once (:meth:`RunGroups.assign`); from then on every call made under one of
its session ids — agents, planner, verifier, embeddings, retries and re-sends alike — reserves and is
charged on the group accounts in the same step as on its session's (:mod:`agent_fleet.spend.budget`).

Durable tallies. A group's spend outlives the process: when a gateway opens, what the store records for
each group (every run's metered calls, and the sends a crash left unanswered) is seeded into it
(:meth:`RunGroups.seed`). A session that is resumed later restores its own log's spend into its session
account (:meth:`~agent_fleet.spend.gateway.Gateway.restore_spent`); its groups were seeded with that
spend already, so each such session's figure at seeding time is its *baseline*, and the groups take only
what its restore adds beyond it (the re-sends charged since). A session first seen after the seeding
was counted live, so its restore adds to its groups only what the gateway did not see. With ``serve``
the gateway's run account is the whole server's (fleet.yaml ``budgets.fleet_usd``) and is seeded and
restored the same way (``run_seeded``).
"""

from __future__ import annotations

from decimal import Decimal

from agent_fleet.domain.accounts import AccountScope, run_of
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.budget import Account, BudgetBook
from agent_fleet.spend.meter import Group, Meter

__all__ = ["RunGroups", "restore_session", "usage_minus"]

_ZERO = Decimal(0)


def usage_minus(a: Usage, b: Usage) -> Usage:
    """``a - b`` field by field, never below zero."""
    return Usage(
        max(0, a.input_tokens - b.input_tokens),
        max(0, a.output_tokens - b.output_tokens),
        max(0, a.cached_input_tokens - b.cached_input_tokens),
        max(0, a.cache_write_tokens - b.cache_write_tokens),
    )


class RunGroups:
    """Which group accounts each run's calls are charged to; the baselines of seeded sessions."""

    def __init__(self, book: BudgetBook, meter: Meter) -> None:
        self.book = book
        self.meter = meter
        self._runs: dict[str, tuple[Account, ...]] = {}
        self._baselines: dict[str, tuple[Usage, Decimal]] = {}
        self.run_seeded = False  # the gateway's run account is seeded from the store (serve)

    def assign(self, run_id: str, *, queue: str | None = None, team: str | None = None) -> None:
        groups: list[Group] = []
        if queue is not None:
            groups.append((AccountScope.QUEUE.value, queue))
        if team is not None:
            groups.append((AccountScope.TEAM.value, team))
        self._runs[run_id] = tuple(self.book.account(AccountScope(scope), key) for scope, key in groups)
        self.meter.assign(run_id, tuple(groups))

    def accounts(self, session_id: str) -> tuple[Account, ...]:
        return self._runs.get(run_of(session_id), ())

    def seed(self, scope: AccountScope, key: str, usage: Usage, cost: Decimal, calls: int) -> None:
        """What the store records as spent for a group (``AccountScope.RUN``: the gateway's run account)."""
        if scope is AccountScope.RUN:
            self.run_seeded = True
            self.book.restore([self.book.run], usage.total_tokens, cost)
            self.meter.seed(None, usage, cost, calls)
            return
        self.book.restore([self.book.account(scope, key)], usage.total_tokens, cost)
        self.meter.seed((scope.value, key), usage, cost, calls)

    def baseline(self, session_id: str, usage: Usage, cost: Decimal) -> None:
        """A session the store holds unfinished: its spend is in its groups' seeds already."""
        self._baselines[session_id] = (usage, cost)

    def restored(self, session_id: str, usage: Usage, cost: Decimal) -> None:
        """A session's restore added ``usage``/``cost`` to its own account: its groups (and the run
        account, when seeded) take what of it lies beyond the session's baseline."""
        base = self._baselines.pop(session_id, None)
        if base is not None:
            usage, cost = usage_minus(usage, base[0]), max(_ZERO, cost - base[1])
        if not usage.total_tokens and not cost:
            return
        accounts = list(self.accounts(session_id))
        if self.run_seeded:
            accounts.append(self.book.run)
            self.meter.run.add(usage, cost, calls=0)
        self.book.restore(accounts, usage.total_tokens, cost)
        for group in self.meter.groups_of(session_id):
            self.meter.group(group).add(usage, cost, calls=0)


def _minus(a: Usage, b: Usage) -> Usage:
    """``a - b`` field by field (may go below zero)."""
    return Usage(
        a.input_tokens - b.input_tokens,
        a.output_tokens - b.output_tokens,
        a.cached_input_tokens - b.cached_input_tokens,
        a.cache_write_tokens - b.cache_write_tokens,
    )


def restore_session(
    restored: dict[str, tuple[Usage, Decimal]],
    groups: RunGroups,
    session_id: str,
    usage: Usage,
    cost_usd: Decimal,
    *,
    queue: str | None,
) -> None:
    """:meth:`~agent_fleet.spend.gateway.Gateway.restore_spent`: seed what the session's log says it
    spent, less what this gateway already charged for it live; idempotent over repeated calls.
    ``restored`` holds what earlier calls restored per session (updated here); ``queue`` is the
    session's own queue account, if it was registered under one."""
    book, meter, seeded = groups.book, groups.meter, groups.run_seeded  # seeded accounts take only what is new
    prev_usage, prev_cost = restored.get(session_id, (Usage(), _ZERO))
    tally = meter.session(session_id)
    live = _minus(tally.usage, prev_usage)
    live_cost = tally.cost_usd - prev_cost
    target = usage_minus(usage, live)
    target_cost = max(_ZERO, Decimal(cost_usd) - live_cost)
    d_tokens = target.total_tokens - prev_usage.total_tokens
    d_cost = target_cost - prev_cost
    restored[session_id] = (target, target_cost)
    own = [book.account(AccountScope.SESSION, session_id), *([] if seeded else [book.run])]
    if queue is not None:
        own.append(book.account(AccountScope.QUEUE, queue))
    book.restore(own, d_tokens, d_cost)
    delta = _minus(target, prev_usage)
    for t in (tally, *([] if seeded else [meter.run])):
        t.add(delta, d_cost, calls=0)
    groups.restored(session_id, usage_minus(target, prev_usage), max(_ZERO, d_cost))
