"""Decoding an event's ``data`` into its payload (:mod:`agent_fleet.domain.payloads`), once per event.

Decoding is tolerant of older logs: a key an older engine did not write decodes to the payload's
default, keys a payload does not name are ignored (but for the records payloads keep whole), and an
event type this engine does not know decodes to :class:`~agent_fleet.domain.payloads.Unknown`.

Only this module reads an event's ``data`` by key; every other reader asks for the payload (a test
holds it to that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, TypeVar

from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.payloads import (
    Alarm,
    AttemptFailed,
    BudgetRaised,
    Calls,
    ChangeRecorded,
    ChangesIntegrated,
    Check,
    CliState,
    ContextCompacted,
    Embeddings,
    ModelDemoted,
    ModelError,
    ModelRequest,
    ModelResent,
    ModelResponse,
    Payload,
    Planned,
    ResultRecorded,
    ReviewDecision,
    Route,
    RunCreated,
    RunEnded,
    RunResumed,
    SessionCompleted,
    SessionCreated,
    SessionFailed,
    SessionPaused,
    SessionPreempted,
    SessionStarted,
    ToolCalled,
    ToolResult,
    Unknown,
    Verification,
)
from agent_fleet.domain.usage import Usage

__all__ = ["decode", "decode_as"]

P = TypeVar("P")

_EMPTY: Mapping[str, Any] = {}


def _str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    return default if v is None else str(v)


def _opt_str(d: Mapping[str, Any], key: str) -> str | None:
    v = d.get(key)
    return None if v is None else str(v)


def _int(d: Mapping[str, Any], key: str) -> int:
    return int(d.get(key) or 0)


def _map(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, Mapping) else _EMPTY


def _dict(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A nested object of the data, read in place (the decoders of nested values take a dict)."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _money(d: Mapping[str, Any], key: str = "cost_usd") -> Decimal:
    return Decimal(str(d.get(key, "0")))


def _calls(d: Mapping[str, Any]) -> Calls:
    return Calls(Usage.from_dict(_dict(d, "usage")), _money(d), _int(d, "calls"), _str(d, "model"))


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _planned(d: Mapping[str, Any]) -> Planned:
    planner = d.get("planner") or None
    return Planned(
        plan=_map(d, "plan"),
        planner=_calls(planner) if planner else None,
        planner_record=planner,
        forecast=d.get("forecast") or None,
        base=d.get("base") or None,
    )


def _alarm(d: Mapping[str, Any]) -> Alarm:
    figures = {k: v for k, v in d.items() if k not in ("kind", "subject", "message")}
    return Alarm(
        _str(d, "kind"),
        _opt_str(d, "subject"),
        _str(d, "message"),
        _opt_str(d, "session_id"),
        bool(d.get("paused")),
        figures,
    )


def _session_created(d: Mapping[str, Any]) -> SessionCreated:
    return SessionCreated(
        run_id=_str(d, "run_id"),
        index=_int(d, "index"),
        partition_id=_str(d, "partition_id"),
        partition=_map(d, "partition"),
        task=_str(d, "task"),
        input_root=_opt_str(d, "input_root"),
        model=_str(d, "model"),
        max_tokens=int(d.get("max_tokens", 4096)),
        temperature=_float(d.get("temperature")),
        seed=_opt_int(d.get("seed")),
        tool_choice=_opt_str(d, "tool_choice"),
    )


def _model_error(d: Mapping[str, Any]) -> ModelError:
    return ModelError(
        turn=_int(d, "turn"),
        error=_str(d, "error"),
        status=_int(d, "status"),
        kind=_opt_str(d, "kind"),
        retried=tuple(str(k) for k in d.get("retried") or ()),
        model=_str(d, "model"),
        planner=bool(d.get("planner")),
        compaction=bool(d.get("compaction")),
        source=_opt_str(d, "source"),
    )


def _resent(d: Mapping[str, Any]) -> ModelResent:
    usage = Usage.from_dict(_dict(d, "usage"))
    cause = _opt_str(d, "cause") or None
    return ModelResent(_int(d, "turn"), usage, _money(d), cause, bool(d.get("compaction")), bool(d.get("planner")))


def _compacted(d: Mapping[str, Any]) -> ContextCompacted:
    return ContextCompacted(
        turn=_int(d, "turn"),
        from_turn=_int(d, "from_turn"),
        through_turn=_int(d, "through_turn"),
        summary=_str(d, "summary"),
        response=ChatResponse.from_dict(_dict(d, "response")),
        tokens_before=_int(d, "tokens_before"),
        tokens_after=_int(d, "tokens_after"),
    )


def _budget(d: Mapping[str, Any]) -> BudgetRaised:
    usd = d.get("usd")
    return BudgetRaised(_opt_int(d.get("tokens")), None if usd is None else Decimal(str(usd)), d)


def _verification(d: Mapping[str, Any]) -> Verification:
    verdicts = d.get("verdicts") or {}
    return Verification(_calls(d), verdicts, d.get("report") or None, _map(d, "skipped"), _int(d, "outside_sample"))


_RUN_ENDED: Callable[[Mapping[str, Any]], Payload] = lambda d: RunEnded(  # noqa: E731
    d.get("summary"), _opt_str(d, "error"), _opt_str(d, "reason")
)
_STARTED: Callable[[Mapping[str, Any]], Payload] = lambda d: SessionStarted(  # noqa: E731
    _int(d, "attempt"), _opt_str(d, "reason"), _opt_str(d, "agent"), _opt_str(d, "worker")
)

_DECODERS: dict[str, Callable[[Mapping[str, Any]], Payload]] = {
    EventType.RUN_CREATED: lambda d: RunCreated(
        _str(d, "task"),
        _str(d, "input"),
        _map(d, "options"),
        _map(d, "owner"),
        _opt_str(d, "via"),
        bool(d.get("planning")),
        d.get("forecast") or None,
        d,
    ),
    EventType.PLAN: _planned,
    EventType.RUN_RESUMED: lambda d: RunResumed(_map(d, "owner"), bool(d.get("retry_failed"))),
    EventType.RUN_INTERRUPTED: _RUN_ENDED,
    EventType.RUN_PAUSED: _RUN_ENDED,
    EventType.RUN_COMPLETED: _RUN_ENDED,
    EventType.RUN_FAILED: _RUN_ENDED,
    EventType.VERIFICATION: _verification,
    EventType.EMBEDDINGS: lambda d: Embeddings(_calls(d)),
    EventType.CHANGES_INTEGRATED: lambda d: ChangesIntegrated(_int(d, "merged"), d),
    EventType.ALARM: _alarm,
    EventType.REVIEW_DECISION: lambda d: ReviewDecision(
        _str(d, "item"),
        _str(d, "kind"),
        _str(d, "subject"),
        _str(d, "decision"),
        _opt_str(d, "note"),
        _str(d, "previous"),
    ),
    EventType.MODEL_DEMOTED: lambda d: ModelDemoted(
        _str(d, "model"), tuple(str(r) for r in d.get("reasons") or ()), _map(d, "signals")
    ),
    EventType.SESSION_CREATED: _session_created,
    EventType.SESSION_STARTED: _STARTED,
    EventType.SESSION_RESUMED: _STARTED,
    EventType.MODEL_REQUEST: lambda d: ModelRequest(
        _int(d, "turn"), bool(d.get("again")), _str(d, "model"), _int(d, "estimate")
    ),
    EventType.MODEL_RESPONSE: lambda d: ModelResponse(
        _int(d, "turn"), ChatResponse.from_dict(_dict(d, "response")), _opt_str(d, "source"), int(d.get("calls", 1))
    ),
    EventType.MODEL_ERROR: _model_error,
    EventType.MODEL_RESENT: _resent,
    EventType.CONTEXT_COMPACTED: _compacted,
    EventType.TOOL_CALL: lambda d: ToolCalled(_str(d, "call_id"), _str(d, "name"), d.get("arguments")),
    EventType.TOOL_RESULT: lambda d: ToolResult(
        _str(d, "call_id"),
        _str(d, "name"),
        _str(d, "output"),
        bool(d.get("is_error")),
        bool(d.get("malformed")),
        _str(d, "summary"),
        bool(d.get("repeated")),
    ),
    EventType.RESULT_ITEM: lambda d: ResultRecorded(_str(d, "id"), _str(d, "title"), d.get("confidence"), d),
    EventType.SESSION_PAUSED: lambda d: SessionPaused(
        _opt_str(d, "reason"), _str(d, "message"), _str(d, "detail"), _opt_str(d, "scope")
    ),
    EventType.SESSION_PREEMPTED: lambda d: SessionPreempted(_str(d, "reason"), _opt_str(d, "by")),
    EventType.ATTEMPT_FAILED: lambda d: AttemptFailed(
        _int(d, "attempt"), _str(d, "kind"), _str(d, "error"), _opt_str(d, "worker")
    ),
    EventType.SESSION_FAILED: lambda d: SessionFailed(_str(d, "error"), _opt_int(d.get("attempts"))),
    EventType.SESSION_COMPLETED: lambda d: SessionCompleted(_str(d, "summary"), _int(d, "results")),
    EventType.BUDGET_RAISED: _budget,
    EventType.ROUTE: lambda d: Route(_str(d, "model"), _str(d, "name"), _str(d, "tier"), _str(d, "reason"), d),
    EventType.CLI_STATE: lambda d: CliState(d),
    EventType.CHANGE: lambda d: ChangeRecorded(
        len(d.get("files") or ()), tuple(str(p) for p in d.get("out_of_scope") or ()), d
    ),
    EventType.CHECK: lambda d: Check(_str(d, "outcome"), _str(d, "change_digest"), d),
}


def decode(event: Event) -> Payload:
    """The event's payload, decoded on first use and kept on the event."""
    kept = event.decoded
    if kept is None:
        decoder = _DECODERS.get(event.type)
        kept = decoder(event.data) if decoder is not None else Unknown(event.data)
        object.__setattr__(event, "decoded", kept)
    return kept  # type: ignore[return-value]


def decode_as(event: Event, kind: type[P]) -> P | None:
    """The event's payload if it is a ``kind``, else None."""
    p = decode(event)
    return p if isinstance(p, kind) else None
