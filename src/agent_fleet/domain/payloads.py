"""The payload of every event type, as a frozen value: the log's schema, in code.

An event's ``data`` is the JSON the log stores; :func:`agent_fleet.domain.decode.decode` turns it into
the payload type of its ``type``. Every field has the default an engine that did not write it meant
(older logs lack ``retried``, ``planner``, ``results`` …). A payload that a reader passes on whole keeps
its record (``Check.record``, ``ChangeRecorded.record``, …).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage

__all__ = [
    "Alarm",
    "AttemptFailed",
    "BudgetRaised",
    "Calls",
    "ChangeRecorded",
    "ChangesIntegrated",
    "Check",
    "CliState",
    "ContextCompacted",
    "Embeddings",
    "ModelDemoted",
    "ModelError",
    "ModelRequest",
    "ModelResent",
    "ModelResponse",
    "Payload",
    "Planned",
    "ResultRecorded",
    "ReviewDecision",
    "Route",
    "RunCreated",
    "RunEnded",
    "RunResumed",
    "SessionCompleted",
    "SessionCreated",
    "SessionFailed",
    "SessionPaused",
    "SessionPreempted",
    "SessionStarted",
    "ToolCalled",
    "ToolResult",
    "Unknown",
    "Verification",
]


def _no_response() -> ChatResponse:
    return ChatResponse(None)


@dataclass(frozen=True, slots=True)
class Calls:
    """Model calls a run's own stream records in one place (verifier, provider embeddings, planner)."""

    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    calls: int = 0
    model: str = ""


# -- the run's stream ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RunCreated:
    task: str = ""
    input: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)  # RunOptions.to_dict()
    owner: Mapping[str, Any] = field(default_factory=dict)
    via: str | None = None  # what recorded it, when not the command line
    planning: bool = False  # recorded before the planner's call made its plan
    forecast: Mapping[str, Any] | None = None
    record: Mapping[str, Any] = field(default_factory=dict)  # the data whole (the run's creating info)


@dataclass(frozen=True, slots=True)
class Planned:
    plan: Mapping[str, Any] = field(default_factory=dict)  # Plan.to_dict()
    planner: Calls | None = None  # the call that planned a goal
    planner_record: Mapping[str, Any] | None = None  # its record whole (subtasks, why, retried …)
    forecast: Mapping[str, Any] | None = None
    base: Mapping[str, Any] | None = None  # the run's base commit when it keeps its sessions' changes


@dataclass(frozen=True, slots=True)
class RunResumed:
    owner: Mapping[str, Any] = field(default_factory=dict)
    retry_failed: bool = False


@dataclass(frozen=True, slots=True)
class RunEnded:
    """run_completed, run_paused, run_failed, run_interrupted."""

    summary: Mapping[str, Any] | None = None  # the run's brief (run_completed, run_paused, run_interrupted)
    error: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    spent: Calls = field(default_factory=Calls)
    verdicts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # result id → Verdict.to_dict()
    report: Mapping[str, Any] | None = None
    skipped: Mapping[str, Any] = field(default_factory=dict)
    outside_sample: int = 0


@dataclass(frozen=True, slots=True)
class Embeddings:
    """Provider embeddings spent since the previous record."""

    spent: Calls = field(default_factory=Calls)


@dataclass(frozen=True, slots=True)
class ChangesIntegrated:
    """The run's changes as branches, written at the end of a dispatch (again, identically, on resume)."""

    merged: int = 0
    record: Mapping[str, Any] = field(default_factory=dict)  # {base, branch, commit, changes, merged}


@dataclass(frozen=True, slots=True)
class Alarm:
    kind: str = ""  # "verification_agreement", "shape.*", …
    subject: str | None = None
    message: str = ""
    session_id: str | None = None
    paused: bool = False
    figures: Mapping[str, Any] = field(default_factory=dict)  # every key but kind, subject, message


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    item: str = ""
    kind: str = ""
    subject: str = ""
    decision: str = ""  # approve | reject
    note: str | None = None
    previous: str = ""  # the item's status before the decision


@dataclass(frozen=True, slots=True)
class ModelDemoted:
    """The router avoids the model for new sessions."""

    model: str = ""
    reasons: tuple[str, ...] = ()
    signals: Mapping[str, Any] = field(default_factory=dict)


# -- an agent session's stream -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SessionCreated:
    run_id: str = ""
    index: int = 0
    partition_id: str = ""
    partition: Mapping[str, Any] = field(default_factory=dict)  # Partition.to_dict()
    task: str = ""
    input_root: str | None = None
    model: str = ""
    max_tokens: int = 4096
    temperature: float | None = None  # the run's call shape, sent as set
    seed: int | None = None
    tool_choice: str | None = None


@dataclass(frozen=True, slots=True)
class SessionStarted:
    """session_started, session_resumed."""

    attempt: int = 0
    reason: str | None = None  # why it was resumed (``retry_failed``)
    agent: str | None = None  # "cli" for a CLI agent's session
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class ModelRequest:
    turn: int = 0
    again: bool = False  # the turn sent again (a turn sent again is still one turn)
    model: str = ""
    estimate: int = 0  # the prompt's raw token estimate (the built-in agent's; 0: not recorded)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    turn: int = 0
    response: ChatResponse = field(default_factory=_no_response)
    # a CLI agent's turn, as the gateway metered it ("gateway"), may hold several calls; the figures
    # count one call per response, as they always have
    source: str | None = None
    calls: int = 1


@dataclass(frozen=True, slots=True)
class ModelError:
    turn: int = 0
    error: str = ""
    status: int = 0
    kind: str | None = None  # the ErrorKind that ended the call
    retried: tuple[str, ...] = ()  # the kinds of the attempts retried before it
    model: str = ""
    planner: bool = False  # the planner's call (run stream)
    compaction: bool = False  # the call that summarises older turns
    source: str | None = None  # "gateway": a CLI agent's call, as the gateway answered it


@dataclass(frozen=True, slots=True)
class ModelResent:
    """A send of unknown fate (a crash lost its answer, or it timed out after it was sent), charged at
    its reservation before the turn is sent again."""

    turn: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: Decimal = Decimal(0)
    cause: str | None = None  # the error kind of a timed-out send; None after a crash
    compaction: bool = False
    planner: bool = False


@dataclass(frozen=True, slots=True)
class ContextCompacted:
    """Turns summarised by one metered model call to keep the requests inside the context window."""

    turn: int = 0
    from_turn: int = 0
    through_turn: int = 0
    summary: str = ""
    response: ChatResponse = field(default_factory=_no_response)
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass(frozen=True, slots=True)
class ToolCalled:
    call_id: str = ""
    name: str = ""
    arguments: Any = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str = ""
    name: str = ""
    output: str = ""
    is_error: bool = False
    malformed: bool = False
    summary: str = ""  # ``finish``'s summary
    # a ``submit_result`` that submitted nothing the session had not submitted already: it ends the session
    repeated: bool = False


@dataclass(frozen=True, slots=True)
class ResultRecorded:
    id: str = ""
    title: str = ""
    confidence: object = None  # as the agent gave it (a number when valid)
    record: Mapping[str, Any] = field(default_factory=dict)  # ResultItem.to_dict()

    def item(self) -> ResultItem:
        return ResultItem.from_dict(dict(self.record))


@dataclass(frozen=True, slots=True)
class SessionPaused:
    reason: str | None = None  # budget, a guard's kind, …; None when none was recorded
    message: str = ""
    detail: str = ""
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class SessionPreempted:
    reason: str = ""
    by: str | None = None


@dataclass(frozen=True, slots=True)
class AttemptFailed:
    attempt: int = 0
    kind: str = ""  # an AttemptKind
    error: str = ""
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class SessionFailed:
    error: str = ""
    attempts: int | None = None


@dataclass(frozen=True, slots=True)
class SessionCompleted:
    summary: str = ""
    results: int = 0


@dataclass(frozen=True, slots=True)
class BudgetRaised:
    """The new caps (None: unchanged)."""

    tokens: int | None = None
    usd: Decimal | None = None
    record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Route:
    model: str = ""
    name: str = ""
    tier: str = ""
    reason: str = ""
    record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CliState:
    """A CLI agent's own conversation (CliState.to_dict())."""

    record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChangeRecorded:
    """What a session changed in its worktree ({base, files, insertions, deletions, patch | patch_base64,
    out_of_scope, refused, digest}), in its completion's append."""

    files: int = 0
    out_of_scope: tuple[str, ...] = ()
    record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Check:
    """The change's check ({change_seq, change_digest, outcome, duration_s, output_tail, exit_code, wait_s}),
    recorded once: a resumed run never runs a recorded check again."""

    outcome: str = ""  # passed | failed | timeout | skipped
    change_digest: str = ""
    record: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Unknown:
    """An event type this engine does not know (a newer engine's)."""

    record: Mapping[str, Any] = field(default_factory=dict)


Payload = (
    RunCreated
    | Planned
    | RunResumed
    | RunEnded
    | Verification
    | Embeddings
    | ChangesIntegrated
    | Alarm
    | ReviewDecision
    | ModelDemoted
    | SessionCreated
    | SessionStarted
    | ModelRequest
    | ModelResponse
    | ModelError
    | ModelResent
    | ContextCompacted
    | ToolCalled
    | ToolResult
    | ResultRecorded
    | SessionPaused
    | SessionPreempted
    | AttemptFailed
    | SessionFailed
    | SessionCompleted
    | BudgetRaised
    | Route
    | CliState
    | ChangeRecorded
    | Check
    | Unknown
)
