"""The exception-based review queue of a run: a pure function of its session log.

What a human should look at, and nothing else:

* results under ``supervision.confidence_threshold`` (``low_confidence``);
* results the verifier refuted (``refuted``) or, with ``review_unsure``, could not decide (``unsure``);
* a verification agreement under its threshold (``agreement``);
* sessions paused by a runaway guard or a budget (``paused``), resolved once the session goes on;
* sessions that failed for good, out of attempts (``out_of_attempts``), resolved if a retry completes;
* decision-shape alarms (``shape``, :mod:`agent_fleet.supervise.shape`);
* code changes that touched paths outside their partition (``out_of_scope``): such a change is kept
  on its own branch and not merged; the item lists the paths.

A decision is a ``review_decision`` event of the run's stream; the latest one per item counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from agent_fleet.config import SupervisionConfig
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.payloads import (
    Alarm,
    ChangeRecorded,
    ResultRecorded,
    ReviewDecision,
    SessionFailed,
    SessionPaused,
    Verification,
)
from agent_fleet.supervise.port import Decision, ReviewItem, ReviewKind, ReviewStatus

__all__ = ["AGENT_TYPES", "decision_event", "queue_counts", "review_queue"]

# The agent-session events the queue reads (the run stream is read whole).
AGENT_TYPES = (
    EventType.RESULT_ITEM,
    EventType.SESSION_STARTED,
    EventType.SESSION_RESUMED,
    EventType.SESSION_PAUSED,
    EventType.SESSION_COMPLETED,
    EventType.SESSION_FAILED,
    EventType.CHANGE,
)
_GOES_ON = frozenset({EventType.SESSION_STARTED, EventType.SESSION_RESUMED, EventType.SESSION_COMPLETED})


def _item(run_id: str, kind: ReviewKind, subject: str, reason: str, ev: Event, **detail: Any) -> ReviewItem:
    session = subject if kind in (ReviewKind.PAUSED, ReviewKind.OUT_OF_ATTEMPTS, ReviewKind.OUT_OF_SCOPE) else None
    if kind in (ReviewKind.LOW_CONFIDENCE, ReviewKind.REFUTED, ReviewKind.UNSURE):
        session = subject.rsplit(".", 1)[0]  # RUN.sNNNNN.rNNNN → RUN.sNNNNN
    return ReviewItem(f"{kind}:{subject}", run_id, kind, subject, session, reason, ev.time, detail=detail)


def _results(run_id: str, events: Iterable[Event], threshold: float) -> Iterable[ReviewItem]:
    for ev in events:
        p = decode(ev)
        conf = p.confidence if isinstance(p, ResultRecorded) else None
        if isinstance(p, ResultRecorded) and isinstance(conf, int | float) and conf < threshold:
            reason = f"confidence {conf:.2f} is under {threshold:.2f}: {p.title[:120]}"
            yield _item(run_id, ReviewKind.LOW_CONFIDENCE, p.id, reason, ev, confidence=conf)


def _sessions(run_id: str, events: Iterable[Event]) -> Iterable[ReviewItem]:
    """The last pause or failure of each session, resolved when the session went on afterwards."""
    last: dict[str, ReviewItem] = {}
    for ev in events:
        sid, p = ev.session_id, decode(ev)
        if isinstance(p, SessionPaused):
            why = "paused" if p.reason is None else p.reason
            text = p.message or p.detail
            reason = f"paused ({why})" + (f": {text}" if text else "")
            last[sid] = _item(run_id, ReviewKind.PAUSED, sid, reason, ev, pause_reason=why)
        elif isinstance(p, SessionFailed):
            reason = f"failed for good after {p.attempts} attempt(s): {p.error}"
            last[sid] = _item(run_id, ReviewKind.OUT_OF_ATTEMPTS, sid, reason, ev, attempts=p.attempts)
        elif ev.type in _GOES_ON and sid in last and last[sid].status is ReviewStatus.OPEN:
            last[sid] = replace(last[sid], status=ReviewStatus.RESOLVED)
    return last.values()


def _changes(run_id: str, events: Iterable[Event]) -> Iterable[ReviewItem]:
    """A session's change with paths outside its partition (its last one counts)."""
    last: dict[str, ReviewItem] = {}
    for ev in events:
        p = decode(ev)
        if isinstance(p, ChangeRecorded) and p.out_of_scope:
            paths = list(p.out_of_scope)
            shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
            reason = f"changed paths outside its partition: {shown} (kept on its own branch, not merged)"
            last[ev.session_id] = _item(run_id, ReviewKind.OUT_OF_SCOPE, ev.session_id, reason, ev, paths=paths)
    return last.values()


def _run_stream(run_id: str, run_events: Sequence[Event], policy: SupervisionConfig) -> Iterable[ReviewItem]:
    verification = next((e for e in reversed(run_events) if e.type == EventType.VERIFICATION), None)
    judged = decode(verification) if verification is not None else None
    if verification is not None and isinstance(judged, Verification):
        for rid, verdict in sorted(judged.verdicts.items()):
            status = verdict.get("status")
            why = str(verdict.get("reason", ""))[:300]
            if status == "refute":
                yield _item(run_id, ReviewKind.REFUTED, rid, f"refuted by the verifier: {why}", verification)
            elif status == "unsure" and policy.review_unsure:
                yield _item(run_id, ReviewKind.UNSURE, rid, f"the verifier was unsure: {why}", verification)
    alarms: dict[str, ReviewItem] = {}
    for ev in run_events:
        alarm = decode(ev)
        if not isinstance(alarm, Alarm):
            continue
        kind, message = alarm.kind, alarm.message
        if kind == "verification_agreement":
            alarms["agreement"] = _item(run_id, ReviewKind.AGREEMENT, run_id, message, ev)
        elif kind.startswith("shape."):
            subject = alarm.subject or alarm.session_id or run_id
            item = ReviewItem(
                f"{kind}:{subject}",
                run_id,
                ReviewKind.SHAPE,
                subject,
                alarm.session_id,
                message,
                ev.time,
                detail={"alarm": kind, **alarm.figures},
            )
            alarms.setdefault(item.id, item)  # an alarm is recorded once; a repeat changes nothing
    yield from alarms.values()


def review_queue(
    run_id: str, run_events: Sequence[Event], agent_events: Sequence[Event], policy: SupervisionConfig
) -> list[ReviewItem]:
    """Every review item of a run, oldest first, with the decision taken on it (if any).

    ``run_events``: the run's own stream; ``agent_events``: its agent sessions' events (at least
    :data:`AGENT_TYPES`) in session then seq order.
    """
    items = [
        *_results(run_id, agent_events, policy.confidence_threshold),
        *_run_stream(run_id, run_events, policy),
        *_sessions(run_id, agent_events),
        *_changes(run_id, agent_events),
    ]
    decided: dict[str, tuple[ReviewDecision, float]] = {}
    for ev in run_events:
        p = decode(ev)
        if isinstance(p, ReviewDecision):
            decided[p.item] = (p, ev.time)
    out = []
    for it in items:
        took = decided.get(it.id)
        if took is not None:
            decision, at = took
            status = ReviewStatus.APPROVED if decision.decision == Decision.APPROVE else ReviewStatus.REJECTED
            it = replace(it, status=status, note=decision.note, decided_at=at)
        out.append(it)
    out.sort(key=lambda i: (i.time, i.id))
    return out


def decision_event(item: ReviewItem, decision: Decision, note: str | None) -> dict[str, Any]:
    """The data of the ``review_decision`` event that decides ``item``."""
    data: dict[str, Any] = {
        "item": item.id,
        "kind": str(item.kind),
        "subject": item.subject,
        "decision": str(decision),
        "previous": str(item.status),
    }
    if note:
        data["note"] = note
    return data


def queue_counts(items: Iterable[ReviewItem]) -> dict[str, Any]:
    by_status: dict[str, int] = {str(s): 0 for s in ReviewStatus}
    by_kind: dict[str, int] = {}
    for it in items:
        by_status[str(it.status)] += 1
        if it.open:
            by_kind[str(it.kind)] = by_kind.get(str(it.kind), 0) + 1
    return {**by_status, "open_by_kind": by_kind}
