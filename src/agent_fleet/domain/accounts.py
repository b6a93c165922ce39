"""Who a budget belongs to: the scope of a spend account, and of a budget that stopped a call.

The gateway keeps one account per ``(scope, key)``; a call refused on budget names the scope in its
:class:`~agent_fleet.errors.BudgetExhausted` and in the ``session_paused`` event the brain writes.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AccountScope"]


class AccountScope(StrEnum):
    SESSION = "session"  # one agent session
    RUN = "run"  # the whole run (the fleet budget)
    QUEUE = "queue"  # a team's admission queue
    MODEL = "model"  # one model across the run
