"""Run figures computed from the session log alone, so the summary always equals what the log holds.

The figures are :class:`~agent_fleet.domain.ledger.RunLedger`'s (what ``tokens``, ``tokens_resent``
and ``errors`` count is said there); this module reads the events they fold from the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_fleet.domain.events import Event, EventType, SessionRecord
from agent_fleet.domain.ledger import RunLedger

if TYPE_CHECKING:
    from agent_fleet.session.port import SessionLog

__all__ = ["FIGURE_EVENTS", "RunFigures", "read_run_figures", "run_figures"]

# The agent-session events :func:`run_figures` reads (:func:`read_run_figures` fetches only these).
FIGURE_EVENTS = [
    EventType.MODEL_RESPONSE,
    EventType.CONTEXT_COMPACTED,
    EventType.MODEL_RESENT,
    EventType.MODEL_ERROR,
    EventType.RESULT_ITEM,
    EventType.ATTEMPT_FAILED,
    EventType.TOOL_RESULT,
]


RunFigures = RunLedger


def run_figures(sessions: list[SessionRecord], events: list[Event], run_events: Sequence[Event] = ()) -> RunLedger:
    """Fold the events of a run's agent sessions, and the model calls recorded in the run's own
    stream, into its figures."""
    return RunLedger.of(sessions, events, run_events)


async def read_run_figures(log: SessionLog, run_id: str) -> dict[str, Any]:
    """A run's figures as ``status RUN`` shows them: the summary's figures, with ``sessions`` counted
    by each state as stored and the number of ``partitions``."""
    sessions = await log.list_sessions(run_id)
    events = await log.events_of_run(run_id, FIGURE_EVENTS)
    figures = run_figures(sessions, events, await log.get_events(run_id)).to_summary()
    by_state = Counter(str(s.state) for s in sessions)
    return {**figures, "sessions": dict(by_state), "partitions": len(sessions)}
