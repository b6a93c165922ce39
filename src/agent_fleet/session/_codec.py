"""Pieces both session-log backends share: JSON text, URL redaction and group-commit batches.

A *batch* is everything a writer drained from its queue in one go; it is committed in one
transaction. :func:`plan_appends` turns a batch and each session's last ``seq`` before it into
event rows, acknowledged :class:`Event` values and what the batch changes in the projection: the
sessions it creates and the state changes of the others (:class:`BatchPlan`). It is pure, so every
backend agrees on every rule of the projection.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState, project_state
from agent_fleet.errors import LeaseLost, StoreError

__all__ = [
    "AppendRequest",
    "BatchPlan",
    "LastSeqs",
    "Outcome",
    "Row",
    "SessionDelta",
    "SnapshotRequest",
    "check_append",
    "decode_data",
    "encode_data",
    "encode_items",
    "fenced_runs",
    "foreign_tables_message",
    "make_event",
    "plan_appends",
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
# orjson writes json's very text (same escapes, separators and integers; byte for byte) for a dict of
# strings, integers, booleans and None, several times faster; many events are such dicts (tool results,
# model requests, lifecycle events). It refuses what json would write differently (a key that is not a
# string, an integer wider than 64 bits, text that is not UTF-8), which then goes through json; so does
# every other dict (floats, which the two spell differently; nested values; other types, some of which
# orjson would write where json refuses them).
_FLAT = frozenset((str, int, bool, type(None)))


def _encode_event(value: dict[str, Any]) -> str:
    if _FLAT.issuperset(map(type, value.values())):
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            pass
    return _encode(value)


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
        text = _encode_event(value)
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


# A request's future and what it resolves to: its events (its one event for ``emit_event``), or the
# error that refused them.
Outcome = tuple[asyncio.Future[Any], Event | list[Event] | BaseException]


@dataclass(slots=True)
class AppendRequest:
    """One ``emit_event``/``emit_events`` call waiting in a writer queue: atomic on its own."""

    session_id: str
    items: Sequence[tuple[str, dict[str, Any], str]]  # (type, data, json text)
    future: asyncio.Future[Any]  # resolves to the list of its events, or to its one event when ``single``
    epoch: int | None = None  # the lease epoch of the run its writer holds (None: an unfenced writer)
    attempt: int | None = None  # the session's attempt fence its writer holds (lease.attempt_fence), or None
    single: bool = False  # an ``emit_event``: one item, acknowledged with the Event itself


@dataclass(slots=True)
class SnapshotRequest:
    key: str
    text: str
    future: asyncio.Future[Any]


@dataclass(slots=True)
class SessionDelta:
    """A session one batch creates: its creating event and the last state the batch moves it to."""

    session_id: str
    first_type: str  # the creating event
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


Row = tuple[str, int, str, float, str]  # an event row: session_id, seq, type, time, JSON text


@dataclass(slots=True)
class BatchPlan:
    """What one batch writes: every event row, and in the projection only what changed."""

    rows: list[Row]
    acks: list[Outcome]  # each request's acknowledgement, in queue order
    last: dict[str, int]  # each session's last ``seq`` once the batch is committed
    created: dict[str, SessionDelta]  # the sessions the batch creates, in the order they first appear
    moved: dict[str, SessionState]  # sessions that existed before whose state the batch changes: the new state


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


# project_state as a bound dict lookup: the rule maps event types (EventType values) to states, so the
# table of every EventType's state is the same function, a call cheaper per event.
_STATE_OF = {t.value: s for t in EventType if (s := project_state(t)) is not None}


def plan_appends(requests: Iterable[AppendRequest], base: Mapping[str, int], now: float) -> BatchPlan:
    """The rows, acknowledgements and projection changes of a batch.

    ``base`` is each session's last ``seq`` before the batch (absent or 0: the batch creates the
    session); it is only read. Queue order within a session becomes ``seq`` order.
    """
    rows: list[Row] = []
    acks: list[Outcome] = []
    last: dict[str, int] = {}
    created: dict[str, SessionDelta] = {}
    moved: dict[str, SessionState] = {}
    add_row, add_ack, event, state_of = rows.append, acks.append, make_event, _STATE_OF.get
    for request in requests:
        sid = request.session_id
        seq = last.get(sid)
        if seq is None:
            seq = base.get(sid, 0)
            if not seq:
                first = request.items[0]
                created[sid] = SessionDelta(sid, first[0], first[1], first[2], None)
        if request.single:
            type_, data, text = request.items[0]
            seq += 1
            add_row((sid, seq, type_, now, text))
            add_ack((request.future, event(sid, seq, type_, now, data)))
            state = state_of(type_)
            if state is not None:
                _moves(sid, state, created, moved)
        else:
            events = []
            for type_, data, text in request.items:
                seq += 1
                add_row((sid, seq, type_, now, text))
                events.append(event(sid, seq, type_, now, data))
                state = state_of(type_)
                if state is not None:
                    _moves(sid, state, created, moved)
            add_ack((request.future, events))
        last[sid] = seq
    return BatchPlan(rows, acks, last, created, moved)


def _moves(sid: str, state: SessionState, created: dict[str, SessionDelta], moved: dict[str, SessionState]) -> None:
    delta = created.get(sid)
    if delta is not None:
        delta.state = state
    else:
        moved[sid] = state


class LastSeqs:
    """Each session's last ``seq`` as its writer last committed or read it: the base of its next batch.

    A writer keeps it so that a batch reads nothing before it writes; each backend knows when an
    entry may be stale (another writer on the store) and drops it (:meth:`forget`).
    """

    LIMIT = 200_000  # sessions remembered

    def __init__(self) -> None:
        self.last: dict[str, int] = {}

    def unknown(self, requests: Iterable[AppendRequest]) -> list[str]:
        """The sessions of ``requests`` not cached, once each."""
        known = self.last
        return list(dict.fromkeys(r.session_id for r in requests if r.session_id not in known))

    def read(self, sessions: Sequence[str], found: Iterable[tuple[str, int]]) -> None:
        """What the store holds for ``sessions`` (the ones not in ``found`` have no events yet)."""
        self.last.update(dict.fromkeys(sessions, 0))
        self.last.update(found)

    def committed(self, last: Mapping[str, int]) -> None:
        if len(self.last) > self.LIMIT:
            self.last.clear()
        self.last.update(last)

    def forget(self, sessions: Iterable[str] | None = None) -> None:
        if sessions is None:
            self.last.clear()
            return
        for sid in sessions:
            self.last.pop(sid, None)


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
) -> tuple[list[AppendRequest], list[tuple[asyncio.Future[Any], BaseException]]]:
    """The requests the store may write and the refusals of those a newer lease fenced off.

    ``epochs`` is each run's lease epoch read in the write transaction; a request whose epoch is
    older is refused (:class:`~agent_fleet.errors.LeaseLost`), its batch-mates are written. So is a
    request whose attempt fence is not its session's current one (a newer attempt took the session).
    """
    allowed: list[AppendRequest] = []
    refused: list[tuple[asyncio.Future[Any], BaseException]] = []
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
