"""The supervision plane: the exception-based review queue, decision-shape alarms, the decision
audit of a run and the models' quality signals.

The queue, the alarms, the audit and the signals are pure functions over session-log events
(:func:`review_queue`, :func:`shape_alarms`, :func:`decision_audit`, :func:`model_signals`), so a
dashboard or a REST layer computes exactly what ``agent-fleet review`` shows; the ``store`` functions
read and append through the session-log port. Importing this package loads only the value types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports
from agent_fleet.supervise.port import Decision, ReviewItem, ReviewKind, ReviewStatus, ShapeAlarm, run_of_item

if TYPE_CHECKING:
    from agent_fleet.supervise.audit import audit_markdown, decision_audit
    from agent_fleet.supervise.quality_signals import model_signals
    from agent_fleet.supervise.queue import queue_counts, review_queue
    from agent_fleet.supervise.review_log import (
        decide,
        load_audit,
        load_review,
        recent_model_signals,
        record_shape_alarms,
        run_policy,
        store_model_signals,
    )
    from agent_fleet.supervise.shape import shape_alarms
    from agent_fleet.supervise.shape_watch import ShapeWatch

__all__ = [
    "Decision",
    "ReviewItem",
    "ReviewKind",
    "ReviewStatus",
    "ShapeAlarm",
    "ShapeWatch",
    "audit_markdown",
    "decide",
    "decision_audit",
    "load_audit",
    "load_review",
    "model_signals",
    "queue_counts",
    "recent_model_signals",
    "record_shape_alarms",
    "review_queue",
    "run_of_item",
    "run_policy",
    "shape_alarms",
    "store_model_signals",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "ShapeWatch": "agent_fleet.supervise.shape_watch",
        "audit_markdown": "agent_fleet.supervise.audit",
        "decision_audit": "agent_fleet.supervise.audit",
        "model_signals": "agent_fleet.supervise.quality_signals",
        "queue_counts": "agent_fleet.supervise.queue",
        "review_queue": "agent_fleet.supervise.queue",
        "shape_alarms": "agent_fleet.supervise.shape",
        "decide": "agent_fleet.supervise.review_log",
        "load_audit": "agent_fleet.supervise.review_log",
        "load_review": "agent_fleet.supervise.review_log",
        "recent_model_signals": "agent_fleet.supervise.review_log",
        "record_shape_alarms": "agent_fleet.supervise.review_log",
        "run_policy": "agent_fleet.supervise.review_log",
        "store_model_signals": "agent_fleet.supervise.review_log",
    },
)
