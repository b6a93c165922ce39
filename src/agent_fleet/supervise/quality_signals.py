"""Per-model quality signals from the session log (pure): verification agreement on a model's
results, its malformed tool calls and its truncated answers (``finish_reason: length``).

A session's events are attributed to the model it was given (``session_created``, then its latest
``route``), as fleet.yaml names it — a provider's answer may carry a dated snapshot id instead —
else to the model its answers name; a verdict to the model of the session that submitted the result.
Events older than ``since`` do not count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model_quality import ModelSignals
from agent_fleet.domain.payloads import ModelResponse, Route, SessionCreated, ToolCalled, ToolResult, Verification

__all__ = ["SIGNAL_TYPES", "model_signals"]

SIGNAL_TYPES = (
    EventType.SESSION_CREATED,
    EventType.ROUTE,
    EventType.MODEL_RESPONSE,
    EventType.TOOL_CALL,
    EventType.TOOL_RESULT,
)


@dataclass(slots=True)
class _Tally:
    calls: int = 0
    truncated: int = 0
    tool_calls: int = 0
    malformed: int = 0
    confirmed: int = 0
    refuted: int = 0


def model_signals(
    agent_events: Iterable[Event], run_events: Iterable[Event], *, since: float
) -> dict[str, ModelSignals]:
    """Signals per model id over ``agent_events`` (session then seq order) and the verdicts recorded
    in ``run_events`` (the runs' own streams)."""
    tallies: dict[str, _Tally] = {}
    model_of: dict[str, str] = {}  # session → the model it was given, else the one its answers name
    for ev in agent_events:
        p = decode(ev)
        if isinstance(p, SessionCreated | Route):
            if p.model:
                model_of[ev.session_id] = p.model
            continue
        if isinstance(p, ModelResponse) and not model_of.get(ev.session_id):
            model_of[ev.session_id] = p.response.model
        model = model_of.get(ev.session_id, "")
        if not model or ev.time < since:
            continue
        t = tallies.setdefault(model, _Tally())
        if isinstance(p, ModelResponse):
            t.calls += 1
            t.truncated += p.response.finish_reason == "length"
        elif isinstance(p, ToolCalled):
            t.tool_calls += 1
        elif isinstance(p, ToolResult) and p.malformed:
            t.malformed += 1
    for ev in run_events:
        p = decode(ev)
        if not isinstance(p, Verification) or ev.time < since:
            continue
        for rid, verdict in p.verdicts.items():
            judged = model_of.get(str(rid).rsplit(".", 1)[0])
            status = verdict.get("status")
            if judged and status in ("confirm", "refute"):
                t = tallies.setdefault(judged, _Tally())
                if status == "confirm":
                    t.confirmed += 1
                else:
                    t.refuted += 1
    return {
        m: ModelSignals(m, t.calls, t.truncated, t.tool_calls, t.malformed, t.confirmed, t.refuted)
        for m, t in sorted(tallies.items())
    }
