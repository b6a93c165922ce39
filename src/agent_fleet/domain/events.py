"""Session-log events and the session lifecycle.

A *session* is an append-only sequence of events ``(session_id, seq, type, time, data)``;
``seq`` starts at 1 and has no gaps. A run has its own stream under the run id (kind ``run``),
holding the plan and the run's lifecycle; every agent session has one (kind ``agent``).

The store keeps a projection of each stream's state; :func:`project_state` is the one rule
that maps an event to the state it moves a session to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Event", "EventType", "SessionRecord", "SessionState", "project_state"]


class EventType(StrEnum):
    """What an event records; the payload of each is a type of :mod:`agent_fleet.domain.payloads`."""

    # run stream
    RUN_CREATED = "run_created"
    PLAN = "plan"
    RUN_RESUMED = "run_resumed"
    RUN_INTERRUPTED = "run_interrupted"
    RUN_PAUSED = "run_paused"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    VERIFICATION = "verification"
    EMBEDDINGS = "embeddings"
    CHANGES_INTEGRATED = "changes_integrated"
    # agent session stream
    SESSION_CREATED = "session_created"
    SESSION_STARTED = "session_started"
    MODEL_REQUEST = "model_request"
    MODEL_RESPONSE = "model_response"
    MODEL_ERROR = "model_error"
    MODEL_RESENT = "model_resent"
    CONTEXT_COMPACTED = "context_compacted"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    RESULT_ITEM = "result_item"
    SESSION_PAUSED = "session_paused"
    SESSION_RESUMED = "session_resumed"
    SESSION_PREEMPTED = "session_preempted"
    ATTEMPT_FAILED = "attempt_failed"
    SESSION_FAILED = "session_failed"
    SESSION_COMPLETED = "session_completed"
    BUDGET_RAISED = "budget_raised"
    ROUTE = "route"
    ALARM = "alarm"
    REVIEW_DECISION = "review_decision"
    MODEL_DEMOTED = "model_demoted"
    CLI_STATE = "cli_state"
    CHANGE = "change"
    CHECK = "check"


class SessionState(StrEnum):
    CREATED = "created"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (SessionState.COMPLETED, SessionState.FAILED)


_TRANSITIONS: dict[str, SessionState] = {
    EventType.RUN_CREATED: SessionState.CREATED,
    EventType.PLAN: SessionState.RUNNING,
    EventType.RUN_RESUMED: SessionState.RUNNING,
    EventType.RUN_INTERRUPTED: SessionState.INTERRUPTED,
    EventType.RUN_PAUSED: SessionState.PAUSED,
    EventType.RUN_COMPLETED: SessionState.COMPLETED,
    EventType.RUN_FAILED: SessionState.FAILED,
    EventType.SESSION_CREATED: SessionState.CREATED,
    EventType.SESSION_STARTED: SessionState.RUNNING,
    EventType.SESSION_RESUMED: SessionState.RUNNING,
    EventType.SESSION_PAUSED: SessionState.PAUSED,
    EventType.SESSION_PREEMPTED: SessionState.QUEUED,
    EventType.SESSION_FAILED: SessionState.FAILED,
    EventType.SESSION_COMPLETED: SessionState.COMPLETED,
}


def project_state(event_type: str) -> SessionState | None:
    """The state an event moves its session to, or None if it does not change the state."""
    return _TRANSITIONS.get(event_type)


@dataclass(frozen=True, slots=True)
class Event:
    session_id: str
    seq: int
    type: str
    time: float  # wall-clock seconds since the epoch
    data: dict[str, Any] = field(default_factory=dict)
    # the payload, once :func:`agent_fleet.domain.payloads.decode` has read ``data`` (a cache: never
    # compared, never stored)
    decoded: object = field(default=None, init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "seq": self.seq, "type": self.type, "time": self.time, "data": self.data}


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """The store's projection of one stream."""

    session_id: str
    kind: str  # "run" | "agent"
    run_id: str | None  # the owning run for agent sessions; None for a run stream
    state: SessionState
    last_seq: int
    created_at: float
    updated_at: float
    info: dict[str, Any] = field(default_factory=dict)  # data of the creating event
