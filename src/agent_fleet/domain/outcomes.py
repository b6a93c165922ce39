"""How one attempt at a session ended, as the brain (or a CLI agent) reports it to dispatch.

The values are the terminal states of :class:`~agent_fleet.domain.events.SessionState` a session can
reach on its own; dispatch counts them, the engine folds them into the run summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Outcome", "SessionOutcome"]


class Outcome(StrEnum):
    COMPLETED = "completed"
    PAUSED = "paused"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    session_id: str
    outcome: Outcome
    reason: str = ""
