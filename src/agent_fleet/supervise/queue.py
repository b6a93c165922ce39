"""The exception-based review queue of a run: a pure function of its session log.

What a human should look at, and nothing else:

* results under ``supervision.confidence_threshold`` (``low_confidence``);
* results the verifier refuted (``refuted``) or, with ``review_unsure``, could not decide (``unsure``);
* a verification agreement under its threshold (``agreement``);
* sessions paused by a runaway guard or a budget (``paused``), resolved once the session goes on;
* sessions that failed for good, out of attempts (``out_of_attempts``), resolved if a retry completes;
* decision-shape alarms (``shape``, :mod:`agent_fleet.supervise.shape`).

A decision is a ``review_decision`` event of the run's stream; the latest one per item counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from agent_fleet.config import SupervisionConfig
from agent_fleet.domain.events import Event, EventType
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
)
_GOES_ON = frozenset({EventType.SESSION_STARTED, EventType.SESSION_RESUMED, EventType.SESSION_COMPLETED})


def _item(run_id: str, kind: ReviewKind, subject: str, reason: str, ev: Event, **detail: Any) -> ReviewItem:
    session = subject if kind in (ReviewKind.PAUSED, ReviewKind.OUT_OF_ATTEMPTS) else None
    if kind in (ReviewKind.LOW_CONFIDENCE, ReviewKind.REFUTED, ReviewKind.UNSURE):
        session = subject.rsplit(".", 1)[0]  # RUN.sNNNNN.rNNNN → RUN.sNNNNN
    return ReviewItem(f"{kind}:{subject}", run_id, kind, subject, session, reason, ev.time, detail=detail)


def _results(run_id: str, events: Iterable[Event], threshold: float) -> Iterable[ReviewItem]:
    for ev in events:
        conf = ev.data.get("confidence") if ev.type == EventType.RESULT_ITEM else None
        if isinstance(conf, int | float) and conf < threshold:
            title = str(ev.data.get("title", ""))[:120]
            reason = f"confidence {conf:.2f} is under {threshold:.2f}: {title}"
            yield _item(run_id, ReviewKind.LOW_CONFIDENCE, str(ev.data["id"]), reason, ev, confidence=conf)


def _sessions(run_id: str, events: Iterable[Event]) -> Iterable[ReviewItem]:
    """The last pause or failure of each session, resolved when the session went on afterwards."""
    last: dict[str, ReviewItem] = {}
    for ev in events:
        sid = ev.session_id
        if ev.type == EventType.SESSION_PAUSED:
            why = str(ev.data.get("reason", "paused"))
            text = str(ev.data.get("message") or ev.data.get("detail") or "")
            reason = f"paused ({why})" + (f": {text}" if text else "")
            last[sid] = _item(run_id, ReviewKind.PAUSED, sid, reason, ev, pause_reason=why)
        elif ev.type == EventType.SESSION_FAILED:
            attempts = ev.data.get("attempts")
            reason = f"failed for good after {attempts} attempt(s): {ev.data.get('error', '')}"
            last[sid] = _item(run_id, ReviewKind.OUT_OF_ATTEMPTS, sid, reason, ev, attempts=attempts)
        elif ev.type in _GOES_ON and sid in last and last[sid].status is ReviewStatus.OPEN:
            last[sid] = replace(last[sid], status=ReviewStatus.RESOLVED)
    return last.values()


def _run_stream(run_id: str, run_events: Sequence[Event], policy: SupervisionConfig) -> Iterable[ReviewItem]:
    verification = next((e for e in reversed(run_events) if e.type == EventType.VERIFICATION), None)
    if verification is not None:
        for rid, verdict in sorted((verification.data.get("verdicts") or {}).items()):
            status = verdict.get("status")
            why = str(verdict.get("reason", ""))[:300]
            if status == "refute":
                yield _item(run_id, ReviewKind.REFUTED, rid, f"refuted by the verifier: {why}", verification)
            elif status == "unsure" and policy.review_unsure:
                yield _item(run_id, ReviewKind.UNSURE, rid, f"the verifier was unsure: {why}", verification)
    alarms: dict[str, ReviewItem] = {}
    for ev in run_events:
        if ev.type != EventType.ALARM:
            continue
        kind = str(ev.data.get("kind", ""))
        message = str(ev.data.get("message", ""))
        if kind == "verification_agreement":
            alarms["agreement"] = _item(run_id, ReviewKind.AGREEMENT, run_id, message, ev)
        elif kind.startswith("shape."):
            subject = str(ev.data.get("subject") or ev.data.get("session_id") or run_id)
            detail = {k: v for k, v in ev.data.items() if k not in ("kind", "subject", "message")}
            item = ReviewItem(
                f"{kind}:{subject}",
                run_id,
                ReviewKind.SHAPE,
                subject,
                ev.data.get("session_id"),
                message,
                ev.time,
                detail={"alarm": kind, **detail},
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
    ]
    decided: dict[str, Event] = {}
    for ev in run_events:
        if ev.type == EventType.REVIEW_DECISION:
            decided[str(ev.data.get("item"))] = ev
    out = []
    for it in items:
        took = decided.get(it.id)
        if took is not None:
            approved = took.data.get("decision") == Decision.APPROVE
            status = ReviewStatus.APPROVED if approved else ReviewStatus.REJECTED
            it = replace(it, status=status, note=took.data.get("note"), decided_at=took.time)
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
