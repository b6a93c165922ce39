"""Value types of the supervision plane: review items, decisions, decision-shape alarms.

A review item's id names what it is about and so which run it belongs to:
``KIND:SUBJECT``, where the subject is a result id (``RUN.sNNNNN.rNNNN``), a session id
(``RUN.sNNNNN``) or the run id, with ``#key`` after it for a run-wide alarm that can repeat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Decision", "ReviewItem", "ReviewKind", "ReviewStatus", "ShapeAlarm", "run_of_item"]


class ReviewKind(StrEnum):
    LOW_CONFIDENCE = "low_confidence"  # a result under the confidence threshold
    REFUTED = "refuted"  # the verifier refuted a result
    UNSURE = "unsure"  # the verifier could not decide
    AGREEMENT = "agreement"  # the run's verification agreement is under its threshold
    PAUSED = "paused"  # a session paused by a guard or a budget
    OUT_OF_ATTEMPTS = "out_of_attempts"  # a session that failed for good
    SHAPE = "shape"  # a decision-shape alarm
    OUT_OF_SCOPE = "out_of_scope"  # a session's change touched paths outside its partition (not merged)


class ReviewStatus(StrEnum):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    RESOLVED = "resolved"  # no decision, but it no longer holds (a paused session went on)


class Decision(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


_RUN = re.compile(r"[^.#]+")


def run_of_item(item_id: str) -> str | None:
    """The run an item id belongs to, or None when it is not an item id."""
    kind, sep, subject = item_id.partition(":")
    m = _RUN.match(subject)
    if not sep or not kind or m is None:
        return None
    return m.group()


@dataclass(frozen=True, slots=True)
class ShapeAlarm:
    """A session (or the run) whose shape is far off: recorded as an ``alarm`` event of the run."""

    kind: str  # shape.turns | shape.tool_calls | shape.tokens | shape.fanout | shape.repeated_call
    subject: str  # the session id, or the run id (with #key for a repeated call)
    message: str
    session_id: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)  # value, median, mad, z … (JSON)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.subject}"

    def to_event(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "subject": self.subject, "message": self.message}
        if self.session_id is not None:
            data["session_id"] = self.session_id
        data.update(self.figures)
        return data


@dataclass(frozen=True, slots=True)
class ReviewItem:
    id: str
    run_id: str
    kind: ReviewKind
    subject: str
    session_id: str | None
    reason: str
    time: float  # when the exception was recorded
    status: ReviewStatus = ReviewStatus.OPEN
    note: str | None = None
    decided_at: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        return self.status is ReviewStatus.OPEN

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "kind": str(self.kind),
            "subject": self.subject,
            "session_id": self.session_id,
            "reason": self.reason,
            "time": self.time,
            "status": str(self.status),
            "note": self.note,
            "decided_at": self.decided_at,
            "detail": self.detail,
        }
