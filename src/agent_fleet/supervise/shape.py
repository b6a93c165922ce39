"""Decision-shape alarms: what a run looks like from its log, never what its answers say.

Pure functions over events. Per run:

* ``shape.outlier`` — a session whose turns, tool calls or tokens sit far above the run's median: a
  robust z-score ``(x - median) / (1.4826 · MAD)`` above ``z_threshold``, and ``x`` at least
  ``min_ratio`` times the median. When more than half the sessions are alike (MAD 0) the scale is
  ``1.2533 · mean absolute deviation`` instead (Iglewicz and Hoaglin's modified z-score); when every
  session is alike there is no outlier.
* ``shape.fanout`` — a trivial task fanned out to many sessions: at least ``fanout_sessions`` sessions
  for an input estimated at no more than ``trivial_tokens``.
* ``shape.repeated_call`` — one tool call (name and arguments) made in ``repeated_calls`` sessions or
  more: the same work done many times. The result protocol's own tools and calls without arguments
  (``list_files()`` lists each session's own partition) do not count.

:class:`SessionShape` is the per-session tally; it folds one event at a time, so a live run can keep
it up to date as events are recorded and ask :func:`outliers` at any moment.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.config import ShapePolicy
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event
from agent_fleet.domain.payloads import ModelResponse, SessionCreated, ToolCalled
from agent_fleet.supervise.port import ShapeAlarm

__all__ = [
    "METRICS",
    "SessionShape",
    "fanout",
    "outliers",
    "repeated_calls",
    "robust_scores",
    "session_shapes",
    "shape_alarms",
]

METRICS = ("turns", "tool_calls", "tokens")
_PROTOCOL_TOOLS = frozenset({"submit_result", "finish"})
_MAD_SCALE = 1.4826  # MAD → standard deviation of a normal distribution
_MEAN_AD_SCALE = 1.253314  # mean absolute deviation → the same


def _call_key(name: str, arguments: Any) -> str | None:
    """A canonical ``name(arguments)``; None for calls that cannot be the same work twice."""
    if name in _PROTOCOL_TOOLS:
        return None
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        args = arguments
    if not args:
        return None
    return f"{name}({json.dumps(args, sort_keys=True, separators=(',', ':'))})"


@dataclass(slots=True)
class SessionShape:
    session_id: str
    turns: int = 0
    tool_calls: int = 0
    tokens: int = 0
    calls: dict[str, int] = field(default_factory=dict)  # canonical call → times made
    est_tokens: int = 0  # the partition's estimate (from session_created)

    def fold(self, ev: Event) -> None:
        p = decode(ev)
        if isinstance(p, ModelResponse):
            self.turns += 1
            self.tokens += p.response.usage.input_tokens + p.response.usage.output_tokens
        elif isinstance(p, ToolCalled):
            self.tool_calls += 1
            key = _call_key(p.name, p.arguments)
            if key is not None:
                self.calls[key] = self.calls.get(key, 0) + 1
        elif isinstance(p, SessionCreated):
            self.est_tokens = int(p.partition.get("est_tokens", 0))

    def value(self, metric: str) -> int:
        return int(getattr(self, metric))

    @property
    def top_repeat(self) -> tuple[str, int] | None:
        if not self.calls:
            return None
        key = max(self.calls, key=lambda k: (self.calls[k], k))
        return key, self.calls[key]


def session_shapes(events: Iterable[Event]) -> dict[str, SessionShape]:
    shapes: dict[str, SessionShape] = {}
    for ev in events:
        shape = shapes.get(ev.session_id)
        if shape is None:
            shape = shapes[ev.session_id] = SessionShape(ev.session_id)
        shape.fold(ev)
    return shapes


def robust_scores(values: Sequence[float]) -> tuple[float, float, list[float]] | None:
    """``(median, scale, z per value)``; None when the values do not spread at all."""
    if not values:
        return None
    med = statistics.median(values)
    deviations = [abs(x - med) for x in values]
    scale = _MAD_SCALE * statistics.median(deviations)
    if scale == 0:
        scale = _MEAN_AD_SCALE * statistics.fmean(deviations)
    if scale == 0:
        return None
    return med, scale, [(x - med) / scale for x in values]


def outliers(shapes: Mapping[str, SessionShape], policy: ShapePolicy) -> list[ShapeAlarm]:
    """One ``shape.outlier`` alarm per session far above the median on any metric."""
    active = sorted((s for s in shapes.values() if s.turns > 0), key=lambda s: s.session_id)
    if len(active) < policy.min_sessions:
        return []
    over: dict[str, dict[str, dict[str, float]]] = {}
    for metric in METRICS:
        values = [float(s.value(metric)) for s in active]
        scored = robust_scores(values)
        if scored is None:
            continue
        med, scale, zs = scored
        for shape, x, z in zip(active, values, zs, strict=True):
            if z > policy.z_threshold and x >= policy.min_ratio * med and x > med:
                over.setdefault(shape.session_id, {})[metric] = {
                    "value": x,
                    "median": med,
                    "scale": round(scale, 4),
                    "z": round(z, 2),
                }
    alarms = []
    for sid, metrics in over.items():
        parts = [
            f"{m.replace('_', ' ')} {v['value']:,.0f} vs the run's median {v['median']:,.0f} (z {v['z']:.1f})"
            for m, v in metrics.items()
        ]
        figures: dict[str, Any] = {"metrics": metrics}
        top = shapes[sid].top_repeat
        if top is not None and top[1] > 1:
            figures["top_repeat"] = {"call": top[0][:200], "times": top[1]}
            parts.append(f"the same call {top[1]} times: {top[0][:80]}")
        alarms.append(ShapeAlarm("shape.outlier", sid, "; ".join(parts), sid, figures))
    return alarms


def fanout(run_id: str, shapes: Mapping[str, SessionShape], policy: ShapePolicy) -> list[ShapeAlarm]:
    sessions = len(shapes)
    est = sum(s.est_tokens for s in shapes.values())
    if sessions < policy.fanout_sessions or est > policy.trivial_tokens:
        return []
    message = f"{sessions} sessions for an input of ~{est:,} tokens (a trivial task fanned out)"
    return [ShapeAlarm("shape.fanout", run_id, message, None, {"sessions": sessions, "est_tokens": est})]


def repeated_calls(run_id: str, shapes: Mapping[str, SessionShape], policy: ShapePolicy) -> list[ShapeAlarm]:
    where: dict[str, list[str]] = {}
    for sid in sorted(shapes):
        for key in shapes[sid].calls:
            where.setdefault(key, []).append(sid)
    alarms = []
    for key, sids in sorted(where.items()):
        if len(sids) < policy.repeated_calls:
            continue
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        message = f"the same tool call in {len(sids)} sessions: {key[:120]}"
        figures = {"call": key[:500], "sessions": len(sids), "session_ids": sids[:20]}
        alarms.append(ShapeAlarm("shape.repeated_call", f"{run_id}#{digest}", message, None, figures))
    return alarms


def shape_alarms(run_id: str, events: Iterable[Event], policy: ShapePolicy) -> list[ShapeAlarm]:
    """Every decision-shape alarm of a run, from its agent sessions' events."""
    shapes = session_shapes(events)
    return [*outliers(shapes, policy), *fanout(run_id, shapes, policy), *repeated_calls(run_id, shapes, policy)]
