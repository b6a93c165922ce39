"""Pure data every plane shares. Imports nothing else from the package but the error tree.

Values that cross planes live here: events and session states, each event type's payload
(:mod:`.payloads`, read from an event by :func:`.decode.decode`), the ledger every figure of a run is
folded in (:mod:`.ledger`), plans, results, usage, session
outcomes (:mod:`.outcomes`), attempt kinds (:mod:`.attempts`) and account scopes (:mod:`.accounts`).
The kinds of model-call errors live here too (:mod:`.errors`), classifying the error tree.
"""

from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.attempts import AttemptKind
from agent_fleet.domain.breaker import BreakerState
from agent_fleet.domain.error_kinds import ErrorKind, error_kind
from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState, project_state
from agent_fleet.domain.ids import new_run_id, session_id_for
from agent_fleet.domain.ledger import RunLedger, SessionLedger
from agent_fleet.domain.model import ChatRequest, ChatResponse, ToolCall, ToolSpec
from agent_fleet.domain.outcomes import Outcome, SessionOutcome
from agent_fleet.domain.payloads import Payload
from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage

__all__ = [
    "AccountScope",
    "AttemptKind",
    "BreakerState",
    "ChatRequest",
    "ChatResponse",
    "ErrorKind",
    "Event",
    "EventType",
    "InputKind",
    "Outcome",
    "Partition",
    "Payload",
    "Plan",
    "PlanNode",
    "ResultItem",
    "RunLedger",
    "SessionOutcome",
    "SessionLedger",
    "SessionRecord",
    "SessionState",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "error_kind",
    "new_run_id",
    "project_state",
    "session_id_for",
]
