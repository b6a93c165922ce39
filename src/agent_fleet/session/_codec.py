"""Pieces both session-log backends share: JSON text, URL redaction and group-commit batches.

A *batch* is everything a writer drained from its queue in one go; it is committed in one
transaction. :func:`plan_batch` reduces a batch to one projection delta per session (how many
events, the creating event, the last state change) and :func:`assign` turns the per-session
base ``seq`` the database handed out into event rows and acknowledged :class:`Event` values.
Both are pure, so the two backends agree on every rule of the projection.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState, project_state
from agent_fleet.errors import LeaseLost, StoreError

__all__ = [
    "AppendRequest",
    "Outcome",
    "SessionDelta",
    "SnapshotRequest",
    "assign",
    "check_append",
    "decode_data",
    "encode_data",
    "encode_items",
    "fenced_runs",
    "foreign_tables_message",
    "make_event",
    "plan_batch",
    "record_from_row",
    "redact_url",
    "resolve_futures",
    "run_of",
    "split_fenced",
]


def _not_json(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder, built once: json.dumps builds a new one per call, a measurable cost per event.
# markers=None skips the cycle check; a cyclic value ends in RecursionError, reported as not JSON.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    _c_encode = _c_make_encoder(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False)

    def _encode(value: object) -> str:
        return "".join(_c_encode(value, 0))

else:  # pragma: no cover - interpreters without the C accelerator
    _encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode  # type: ignore[assignment]
_decode = json.JSONDecoder().decode
# An escaped NUL that is not itself the tail of an escaped backslash ("\\u0000" is text, not NUL).
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def encode_data(data: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The event data as a plain dict and as compact JSON text.

    NUL characters are stored as U+FFFD by every backend: PostgreSQL ``jsonb`` cannot hold
    them, and both backends must return the same data for the same input.
    """
    if data is None:
        return {}, "{}"
    value = data if type(data) is dict else dict(data)
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"event data is not JSON: {str(exc)[:200]}") from None
    if "\\u0000" in text:
        text = _ESCAPED_NUL.sub(r"\1\\ufffd", text)
        value = _decode(text)
    # The caller keeps its dict; the stored event gets its own copy.
    return (dict(value) if value is data else value), text


def encode_items(
    session_id: str, events: Iterable[tuple[str, Mapping[str, Any] | None]]
) -> list[tuple[str, dict[str, Any], str]]:
    """``emit_events``' events, checked and encoded: (type, data, JSON text) each."""
    items = []
    for type_, data in events:
        check_append(session_id, type_)
        value, text = encode_data(data)
        items.append((type_, value, text))
    return items


def decode_data(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = _decode(text)
    return value if isinstance(value, dict) else {"value": value}


def check_append(session_id: object, type: object) -> None:
    if not isinstance(session_id, str) or not session_id:
        raise StoreError(f"session id must be a non-empty string, got {session_id!r}")
    if not isinstance(type, str) or not type:
        raise StoreError(f"event type must be a non-empty string, got {type!r}")


def foreign_tables_message(where: str, names: Sequence[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"session store {where} holds tables that are not the engine's ({shown}); give the engine a database "
        "of its own, or add ?foreign_tables=allow to the store URL to share it"
    )


def redact_url(url: str) -> str:
    """The URL with any password replaced, safe for messages and logs."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        user = parts.username or ""
        return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, parts.fragment))
    except ValueError:
        return f"{url.split(':', 1)[0]}://<unparseable URL>"


# -- group commit -------------------------------------------------------------------------------


# A request's future and what it resolves to: its events, or the error that refused them.
Outcome = tuple[asyncio.Future[list[Event]], list[Event] | BaseException]


@dataclass(slots=True)
class AppendRequest:
    """One ``emit_event``/``emit_events`` call waiting in a writer queue: atomic on its own."""

    session_id: str
    items: Sequence[tuple[str, dict[str, Any], str]]  # (type, data, json text)
    future: asyncio.Future[list[Event]]
    epoch: int | None = None  # the lease epoch of the run its writer holds (None: an unfenced writer)
    attempt: int | None = None  # the session's attempt fence its writer holds (lease.attempt_fence), or None


@dataclass(slots=True)
class SnapshotRequest:
    key: str
    text: str
    future: asyncio.Future[list[Event]]


@dataclass(slots=True)
class SessionDelta:
    """What one batch does to one session's projection row."""

    session_id: str
    count: int
    first_type: str  # the creating event, if this batch creates the stream
    first_data: dict[str, Any]
    first_text: str
    state: SessionState | None  # the last state change in the batch, None when unchanged

    @property
    def kind(self) -> str:
        return "run" if self.first_type == EventType.RUN_CREATED else "agent"

    @property
    def run_id(self) -> str | None:
        if self.first_type == EventType.RUN_CREATED:
            return None
        value = self.first_data.get("run_id")
        return value if isinstance(value, str) else None

    @property
    def created_state(self) -> SessionState:
        return self.state if self.state is not None else SessionState.CREATED


def plan_batch(requests: Iterable[AppendRequest], *, ordered: bool = True) -> dict[str, SessionDelta]:
    """One delta per session; in session-id order unless ``ordered`` is False (a fixed lock order
    between concurrent writers, which a store that takes one writer at a time does not need)."""
    deltas: dict[str, SessionDelta] = {}
    for request in requests:
        sid, items = request.session_id, request.items
        delta = deltas.get(sid)
        if delta is None:
            first = items[0]
            delta = deltas[sid] = SessionDelta(sid, len(items), first[0], first[1], first[2], None)
        else:
            delta.count += len(items)
        for item in items:
            state = project_state(item[0])
            if state is not None:
                delta.state = state
    return {key: deltas[key] for key in sorted(deltas)} if ordered else deltas


def _event_maker() -> Callable[[str, int, str, float, dict[str, Any]], Event]:
    """``Event(...)``, built by setting its five slots directly.

    ``Event`` is a frozen dataclass: its ``__init__`` sets each field through ``object.__setattr__``,
    about half of what a writer spends on each acknowledged event. The object built here is the
    same (equal, hashable, immutable afterwards). Should ``Event`` ever change shape (other
    fields, a ``__post_init__``, no slots), the constructor itself is used.
    """
    names = ("session_id", "seq", "type", "time", "data")
    shape = tuple(f.name for f in fields(Event))
    if shape != names or hasattr(Event, "__post_init__") or "__slots__" not in vars(Event):
        return Event
    new = object.__new__
    set_sid, set_seq, set_type, set_time, set_data = (vars(Event)[name].__set__ for name in names)

    def make(session_id: str, seq: int, type: str, time: float, data: dict[str, Any]) -> Event:
        event = new(Event)
        set_sid(event, session_id)
        set_seq(event, seq)
        set_type(event, type)
        set_time(event, time)
        set_data(event, data)
        return event

    return make


make_event = _event_maker()


def assign(
    requests: Iterable[AppendRequest], base: dict[str, int], now: float
) -> tuple[list[tuple[str, int, str, float, str]], list[Outcome]]:
    """Event rows and each request's acknowledgement, given the last ``seq`` before this batch per session.

    ``base`` is advanced in place; queue order within a session becomes ``seq`` order.
    """
    rows: list[tuple[str, int, str, float, str]] = []
    acks: list[Outcome] = []
    add_row, add_ack, event = rows.append, acks.append, make_event
    for request in requests:
        sid = request.session_id
        seq = base[sid]
        events = []
        for type_, data, text in request.items:
            seq += 1
            add_row((sid, seq, type_, now, text))
            events.append(event(sid, seq, type_, now, data))
        base[sid] = seq
        add_ack((request.future, events))
    return rows, acks


def fenced_runs(requests: Iterable[AppendRequest]) -> list[str]:
    """Lease rows the batch must check, sorted: the run of each fenced request, and the session of
    each request written under an attempt fence (its lease row is keyed by the session id)."""
    keys: set[str] = set()
    for r in requests:
        if r.epoch is not None:
            keys.add(run_of(r.session_id))
        if r.attempt is not None:
            keys.add(r.session_id)
    return sorted(keys)


def split_fenced(
    requests: list[AppendRequest], epochs: Mapping[str, int]
) -> tuple[list[AppendRequest], list[tuple[asyncio.Future[list[Event]], BaseException]]]:
    """The requests the store may write and the refusals of those a newer lease fenced off.

    ``epochs`` is each run's lease epoch read in the write transaction; a request whose epoch is
    older is refused (:class:`~agent_fleet.errors.LeaseLost`), its batch-mates are written. So is a
    request whose attempt fence is not its session's current one (a newer attempt took the session).
    """
    allowed: list[AppendRequest] = []
    refused: list[tuple[asyncio.Future[list[Event]], BaseException]] = []
    for request in requests:
        if request.attempt is not None and epochs.get(request.session_id) != request.attempt:
            held = epochs.get(request.session_id)
            message = (
                f"session {request.session_id} was taken over by a newer attempt (attempt fence {held}, "
                f"this attempt held {request.attempt}); this attempt stopped writing"
            )
            refused.append((request.future, LeaseLost(message)))
            continue
        if request.epoch is not None:
            run = run_of(request.session_id)
            current = epochs.get(run)
            if current is not None and current != request.epoch:
                refused.append(
                    (
                        request.future,
                        LeaseLost(
                            f"run {run} was taken over by another engine (lease epoch {current}, "
                            f"this engine held {request.epoch}); this engine stopped writing"
                        ),
                    )
                )
                continue
        allowed.append(request)
    return allowed, refused


def run_of(session_id: str) -> str:
    """The run a session belongs to: ``RUN`` for ``RUN`` and every ``RUN.xxx``."""
    return session_id.split(".", 1)[0]


def resolve_futures(outcomes: Sequence[Outcome]) -> None:
    """Runs on the futures' event loop; a caller that gave up waiting is skipped."""
    for future, outcome in outcomes:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def record_from_row(
    session_id: str,
    kind: str,
    run_id: str | None,
    state: str | None,
    last_seq: int,
    created_at: float,
    updated_at: float,
    info: dict[str, Any],
) -> SessionRecord:
    # A NULL state means no event has moved the stream since it was created.
    return SessionRecord(
        session_id=session_id,
        kind=kind,
        run_id=run_id,
        state=SessionState(state) if state else SessionState.CREATED,
        last_seq=int(last_seq),
        created_at=float(created_at),
        updated_at=float(updated_at),
        info=info,
    )
