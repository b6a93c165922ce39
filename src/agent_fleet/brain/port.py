"""The brain port: what the rest of the engine may use of the harness.

Dispatch runs sessions through a :class:`BrainFactory` it is given (the engine passes
:class:`~agent_fleet.brain.harness.Harness`); it never imports the harness itself. The value types
other planes read are here too: the per-session :class:`Limits`, the :class:`SessionView` folded
from a session's events (a CLI-agent session reads its partition, spend and state from it), and the
:class:`TurnGuard` a runaway guard implements.
"""

from __future__ import annotations

from typing import Protocol

from agent_fleet.brain.step import Limits
from agent_fleet.brain.view import GuardTrip, SessionView, TurnGuard
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.hands.port import Hands
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["Brain", "BrainFactory", "GuardTrip", "Limits", "Outcome", "SessionOutcome", "SessionView", "TurnGuard"]


class Brain(Protocol):
    """Drives one session from its log to an outcome. Holds nothing it could not rebuild from the log."""

    async def run(self, session_id: str, *, attempt: int = 1) -> SessionOutcome: ...


class BrainFactory(Protocol):
    """Builds a brain for one attempt, over that attempt's own views of the log, gateway and hands."""

    def __call__(self, *, log: SessionLog, gateway: ModelGateway, hands: Hands, limits: Limits) -> Brain: ...
