"""Who a budget belongs to: the scope of a spend account, and of a budget that stopped a call.

The gateway keeps one account per ``(scope, key)``; a call refused on budget names the scope in its
:class:`~agent_fleet.errors.BudgetExhausted` and in the ``session_paused`` event the brain writes.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AccountScope", "queue_account", "run_of"]


class AccountScope(StrEnum):
    SESSION = "session"  # one agent session
    RUN = "run"  # the whole run (the fleet budget)
    QUEUE = "queue"  # a LocalQueue (namespace/name): fleet.yaml budgets.queue_usd
    TEAM = "team"  # a team of `agent-fleet serve`: every call of all its runs
    MODEL = "model"  # one model across the run


def run_of(session_id: str) -> str:
    """The run a session id belongs to: every call of a run (its agents ``RUN.sNNNNN``, its planner,
    verifier and embeddings) is made under an id that starts with ``RUN.``."""
    return session_id.partition(".")[0]


def queue_account(queue: str | None) -> str:
    """The account key of a LocalQueue named as ``--queue`` names it: ``namespace/name``, a bare name
    being in namespace ``default`` (as Kueue's LocalQueue keys; fleet.yaml ``budgets.queue_usd`` keys)."""
    name = queue or "default"
    return name if "/" in name else f"default/{name}"
