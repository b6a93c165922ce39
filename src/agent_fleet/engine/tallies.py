"""Durable spend tallies: what the store records as spent per team, per LocalQueue and per server,
seeded into a gateway when it opens, so budgets and figures survive a restart — a ``kill -9`` included.

The store is the record: every metered call is in a run's log (agents' answers, context summaries, the
planner's call in the ``plan`` event, verifier calls and provider embeddings in the run's stream) and
so is every send a crash left unanswered (``model_resent``, charged at its reservation). A run's spend
is folded by :class:`~agent_fleet.domain.ledger.RunLedger`, the ledger ``status`` and the summary
read; the tallies are those sums, nothing counted apart. Each unfinished session's own figure becomes its
baseline (:mod:`agent_fleet.spend.groups`), so resuming it later adds to its groups only what is new.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, SessionState
from agent_fleet.domain.ledger import RunLedger, SessionLedger, Tally
from agent_fleet.domain.payloads import RunCreated
from agent_fleet.observe.summary import FIGURE_EVENTS
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.gateway import Gateway

__all__ = ["GroupOf", "Spend", "seed_tallies", "spent_by_group"]

GroupOf = Callable[[Mapping[str, Any]], Iterable[tuple[AccountScope, str]]]
_ALL_RUNS = 1_000_000_000


Spend = Tally  # what a group or a session spent: calls, their tokens and their list-price cost


async def spent_by_group(
    log: SessionLog, groups_of: GroupOf
) -> tuple[dict[tuple[AccountScope, str], Spend], dict[str, Spend]]:
    """Every run's spend summed per group ``groups_of(run_created data)`` names (runs it names none of
    are not read), and the figure of each unfinished session of those runs."""
    totals: dict[tuple[AccountScope, str], Spend] = defaultdict(Spend)
    baselines: dict[str, Spend] = {}
    for rec in await log.list_runs(limit=_ALL_RUNS):
        run_events = await log.get_events(rec.session_id)
        created = next((p for p in map(decode, run_events) if isinstance(p, RunCreated)), None)
        groups = list(groups_of(created.record)) if created is not None else []
        if not groups:
            continue
        sessions = await log.list_sessions(rec.session_id)
        events = await log.events_of_run(rec.session_id, FIGURE_EVENTS)
        ledger = RunLedger.of(sessions, events, run_events)
        for group in groups:
            totals[group].add(*ledger.spent, ledger.llm_calls)
        by_session: dict[str, list[Event]] = defaultdict(list)
        for ev in events:
            by_session[ev.session_id].append(ev)
        for srec in sessions:
            if srec.state is not SessionState.COMPLETED:  # a failed one may be retried
                own = SessionLedger().fold_all(by_session.get(srec.session_id, []))
                baselines[srec.session_id] = Tally(*own.spent)
    return dict(totals), baselines


async def seed_tallies(log: SessionLog, gateway: Gateway, groups_of: GroupOf) -> dict[tuple[AccountScope, str], Spend]:
    """Seed the gateway's group accounts (and their meter tallies) with what the store records; returns
    the sums seeded. Call it once, when the gateway opens, before any run of those groups goes on."""
    totals, baselines = await spent_by_group(log, groups_of)
    for (scope, key), spend in sorted(totals.items()):
        gateway.groups.seed(scope, key, spend.usage, spend.cost_usd, spend.calls)
    for session_id, spend in baselines.items():
        gateway.groups.baseline(session_id, spend.usage, spend.cost_usd)
    return totals
