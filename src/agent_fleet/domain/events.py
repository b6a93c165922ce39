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
    # run stream
    RUN_CREATED = "run_created"  # {task, input, options}
    PLAN = "plan"  # {plan}
    RUN_RESUMED = "run_resumed"
    RUN_INTERRUPTED = "run_interrupted"
    RUN_PAUSED = "run_paused"
    RUN_COMPLETED = "run_completed"  # {summary}
    RUN_FAILED = "run_failed"  # {error}
    VERIFICATION = "verification"  # {report, verdicts, skipped, model, calls, usage, cost_usd}
    EMBEDDINGS = "embeddings"  # {calls, usage, cost_usd}: provider embeddings spent since the last one
    # agent session stream
    SESSION_CREATED = "session_created"  # {run_id, partition_id, index, ...}
    SESSION_QUEUED = "session_queued"
    SESSION_ADMITTED = "session_admitted"
    SESSION_STARTED = "session_started"
    MODEL_REQUEST = "model_request"  # {turn, model}
    MODEL_RESPONSE = "model_response"  # {turn, response: ChatResponse.to_dict()}
    MODEL_ERROR = "model_error"  # {turn, error, status}
    # {turn, request_seq, usage, cost_usd}: a request found unanswered on wake, charged at its reservation
    # (the provider may have answered and billed it) before it is sent again
    MODEL_RESENT = "model_resent"
    # {turn, from_turn, through_turn, summary, response: ChatResponse.to_dict(), tokens_before, tokens_after}:
    # turns summarised by one metered model call to keep the requests inside the context window
    CONTEXT_COMPACTED = "context_compacted"
    TOOL_CALL = "tool_call"  # {call_id, name, arguments}
    TOOL_RESULT = "tool_result"  # {call_id, output, is_error}
    RESULT_ITEM = "result_item"  # ResultItem.to_dict()
    SESSION_PAUSED = "session_paused"  # {reason}
    SESSION_RESUMED = "session_resumed"
    SESSION_PREEMPTED = "session_preempted"  # {reason, by}
    ATTEMPT_FAILED = "attempt_failed"  # {attempt, kind: timeout|provider, error}
    SESSION_FAILED = "session_failed"  # {error}
    SESSION_COMPLETED = "session_completed"  # {summary}
    BUDGET_RAISED = "budget_raised"  # {tokens?, usd?}
    ROUTE = "route"  # {model, reason}
    ALARM = "alarm"  # {kind, message, ...}: verification agreement, decision shape (kind "shape.*")
    REVIEW_DECISION = "review_decision"  # {item, kind, subject, decision: approve|reject, note}: run stream
    MODEL_DEMOTED = "model_demoted"  # {model, name, reasons, signals}: the router avoids it for new sessions
    CLI_STATE = "cli_state"  # {format, cli_session_id, workdir, files, bytes}: a CLI agent's own conversation


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
    EventType.SESSION_QUEUED: SessionState.QUEUED,
    EventType.SESSION_ADMITTED: SessionState.RUNNING,
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
