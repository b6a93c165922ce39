"""Pure data every plane shares. Imports nothing else from the package."""

from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState, project_state
from agent_fleet.domain.ids import new_run_id, session_id_for
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall, ToolSpec
from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "Event",
    "EventType",
    "InputKind",
    "Partition",
    "Plan",
    "PlanNode",
    "ResultItem",
    "SessionRecord",
    "SessionState",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "new_run_id",
    "project_state",
    "session_id_for",
]
