"""The supervision plane against a session log: read a run's review queue, record a decision, record
a run's shape alarms once, and count the models' quality signals over the recent runs.

Everything it decides comes from the pure functions beside it; this module only reads and appends.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from agent_fleet.config import QualityPolicy, ShapePolicy, SupervisionConfig, load_config
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model_quality import ModelSignals
from agent_fleet.domain.payloads import Alarm, RunCreated
from agent_fleet.errors import SessionNotFound, UsageError
from agent_fleet.session.port import SessionLog
from agent_fleet.supervise.audit import AUDIT_TYPES, decision_audit
from agent_fleet.supervise.port import Decision, ReviewItem, ShapeAlarm, run_of_item
from agent_fleet.supervise.quality_signals import model_signals
from agent_fleet.supervise.queue import AGENT_TYPES, decision_event, review_queue
from agent_fleet.supervise.shape import shape_alarms

__all__ = [
    "SHAPE_TYPES",
    "decide",
    "run_policy",
    "load_audit",
    "load_review",
    "recent_model_signals",
    "record_shape_alarms",
]

SHAPE_TYPES = (EventType.SESSION_CREATED, EventType.MODEL_RESPONSE, EventType.TOOL_CALL)


async def _run_events(log: SessionLog, run_id: str) -> list[Event]:
    record = await log.get_session(run_id)
    if record is None or record.kind != "run":
        raise SessionNotFound(f"no run {run_id!r} in this store")
    return await log.get_events(run_id)


async def run_policy(log: SessionLog, run_id: str, config_path: str | None = None) -> SupervisionConfig:
    """The ``supervision:`` thresholds for a run: ``config_path``'s, else those of the fleet.yaml the run
    was deployed with (when it is still there), else the defaults."""
    path = config_path
    if path is None:
        for ev in await _run_events(log, run_id):
            created = decode(ev)
            if isinstance(created, RunCreated):
                recorded = created.options.get("config_path")
                if recorded and await asyncio.to_thread(os.path.exists, recorded):
                    path = recorded
                break
    return (await asyncio.to_thread(load_config, path)).supervision


async def load_review(log: SessionLog, run_id: str, policy: SupervisionConfig) -> list[ReviewItem]:
    run_events = await _run_events(log, run_id)
    agent = await log.events_of_run(run_id, AGENT_TYPES)
    return review_queue(run_id, run_events, agent, policy)


async def load_audit(
    log: SessionLog, run_id: str, policy: SupervisionConfig
) -> tuple[dict[str, Any], list[ReviewItem]]:
    run_events = await _run_events(log, run_id)
    agent = await log.events_of_run(run_id, sorted({*AGENT_TYPES, *AUDIT_TYPES}))
    items = review_queue(run_id, run_events, agent, policy)
    return decision_audit(run_events, agent, items), items


async def decide(
    log: SessionLog, item_id: str, decision: Decision, note: str | None, policy: SupervisionConfig
) -> tuple[ReviewItem, Event]:
    """Record a decision on an item of the queue; the item as it was and the appended event."""
    run_id = run_of_item(item_id)
    if run_id is None:
        raise UsageError(f"{item_id!r} is not a review item id (KIND:SUBJECT, as `agent-fleet review` lists them)")
    items = {i.id: i for i in await load_review(log, run_id, policy)}
    item = items.get(item_id)
    if item is None:
        raise SessionNotFound(f"no review item {item_id!r} in run {run_id}")
    event = await log.emit_event(run_id, EventType.REVIEW_DECISION, decision_event(item, decision, note))
    return item, event


async def record_shape_alarms(
    log: SessionLog, run_id: str, policy: ShapePolicy, *, events: Sequence[Event] | None = None
) -> list[ShapeAlarm]:
    """The run's shape alarms not recorded yet, appended to its stream as ``alarm`` events."""
    if events is None:
        events = await log.events_of_run(run_id, SHAPE_TYPES)
    alarms = [decode(e) for e in await log.get_events(run_id) if e.type == EventType.ALARM]
    recorded = {f"{a.kind}:{a.subject}" for a in alarms if isinstance(a, Alarm) and a.kind.startswith("shape.")}
    new = [a for a in shape_alarms(run_id, events, policy) if a.key not in recorded]
    if new:
        await log.emit_events(run_id, [(EventType.ALARM, a.to_event()) for a in new])
    return new


def quality_key(run_id: str) -> str:
    return f"quality/{run_id}"


async def store_model_signals(
    log: SessionLog, run_id: str, agent_events: Sequence[Event], run_events: Sequence[Event], *, now: float
) -> dict[str, ModelSignals]:
    """A finished run's signals per model, kept as a snapshot so later runs read a few numbers per run
    instead of its every answer."""
    signals = model_signals(agent_events, run_events, since=0.0)
    await log.put_snapshot(quality_key(run_id), {"time": now, "models": [s.to_dict() for s in signals.values()]})
    return signals


async def recent_model_signals(log: SessionLog, policy: QualityPolicy, *, now: float) -> dict[str, ModelSignals]:
    """Signals per model summed over the last ``policy.runs`` runs that recorded theirs (at their end)
    within ``policy.window_s`` of ``now``."""
    since = now - policy.window_s
    total: dict[str, ModelSignals] = {}
    counted = 0
    for run in await log.list_runs(max(100, 2 * policy.runs)):
        if counted == policy.runs:
            break
        if run.updated_at < since:
            continue
        snap = await log.get_snapshot(quality_key(run.session_id))
        if snap is None or float(snap.get("time", 0)) < since:
            continue
        counted += 1
        for data in snap.get("models", []):
            s = ModelSignals.from_dict(data)
            total[s.model] = total[s.model] + s if s.model in total else s
    return dict(sorted(total.items()))
