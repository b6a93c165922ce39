"""The decision-summary audit of a run (pure): what the engine decided, not what the agents said.

* routes — the model each session was first given (by the router, else the run's model);
* escalations — a later route to a higher tier (the gateway's fallback after a failure), and every
  other fallback; model demotions the quality signals caused;
* pauses and preemptions by reason;
* alarms by kind, and the review queue's items by status with every human decision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from agent_fleet.config import TIERS
from agent_fleet.domain.events import Event, EventType
from agent_fleet.supervise.port import ReviewItem

__all__ = ["AUDIT_TYPES", "audit_markdown", "decision_audit"]

AUDIT_TYPES = (EventType.SESSION_CREATED, EventType.ROUTE, EventType.SESSION_PAUSED, EventType.SESSION_PREEMPTED)


def _tier(route: dict[str, Any]) -> int:
    tier = route.get("tier")
    return TIERS.index(tier) if tier in TIERS else -1


def decision_audit(
    run_events: Sequence[Event], agent_events: Iterable[Event], items: Sequence[ReviewItem]
) -> dict[str, Any]:
    first_route: dict[str, dict[str, Any]] = {}
    last_route: dict[str, dict[str, Any]] = {}
    fallbacks: list[dict[str, Any]] = []
    escalations = 0
    pauses: Counter[str] = Counter()
    preemptions: Counter[str] = Counter()
    given: dict[str, str] = {}  # session → the model it was created with (a run without routing tiers)
    for ev in agent_events:
        if ev.type == EventType.SESSION_CREATED:
            given[ev.session_id] = str(ev.data.get("model") or "")
        elif ev.type == EventType.ROUTE:
            sid = ev.session_id
            if sid not in first_route:
                first_route[sid] = last_route[sid] = ev.data
                continue
            before = last_route[sid]
            up = _tier(ev.data) > _tier(before) >= 0
            escalations += up
            fallbacks.append(
                {
                    "session_id": sid,
                    "from": before.get("name") or before.get("model"),
                    "to": ev.data.get("name") or ev.data.get("model"),
                    "escalation": up,
                    "reason": ev.data.get("reason", ""),
                }
            )
            last_route[sid] = ev.data
        elif ev.type == EventType.SESSION_PAUSED:
            pauses[str(ev.data.get("reason", "paused"))] += 1
        elif ev.type == EventType.SESSION_PREEMPTED:
            preemptions[str(ev.data.get("reason") or "preempted")] += 1
    routes = Counter(str(r.get("name") or r.get("model")) for r in first_route.values())
    routes.update(m for sid, m in given.items() if sid not in first_route and m)
    demotions = [
        {"model": e.data.get("model"), "reasons": e.data.get("reasons", [])}
        for e in run_events
        if e.type == EventType.MODEL_DEMOTED
    ]
    alarms = Counter(str(e.data.get("kind", "")) for e in run_events if e.type == EventType.ALARM)
    statuses = Counter(str(i.status) for i in items)
    decisions = [{"item": i.id, "decision": str(i.status), "note": i.note} for i in items if i.decided_at is not None]
    return {
        "routes": dict(sorted(routes.items())),
        "fallbacks": len(fallbacks),
        "escalations": escalations,
        "fallback_routes": fallbacks[:50],
        "demotions": demotions,
        "pauses": dict(sorted(pauses.items())),
        "preemptions": dict(sorted(preemptions.items())),
        "alarms": dict(sorted(alarms.items())),
        "reviews": {"total": len(items), **dict(sorted(statuses.items()))},
        "decisions": decisions,
    }


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) if counts else "none"


def audit_markdown(audit: dict[str, Any], items: Sequence[ReviewItem] = (), *, top: int = 20) -> str:
    """The ``## Decisions`` section of report.md."""
    reviews = dict(audit.get("reviews") or {})
    total = reviews.pop("total", 0)
    demoted = "; ".join(f"{d['model']} ({', '.join(d['reasons'])})" for d in audit.get("demotions", [])) or "none"
    out = [
        "## Decisions",
        "",
        "| decision | count |",
        "|---|---|",
        f"| Routes (first model per session) | {_counts(audit.get('routes', {}))} |",
        f"| Fallbacks (escalations to a higher tier) | {audit.get('fallbacks', 0)} ({audit.get('escalations', 0)}) |",
        f"| Models demoted on quality | {demoted} |",
        f"| Pauses | {_counts(audit.get('pauses', {}))} |",
        f"| Preemptions | {_counts(audit.get('preemptions', {}))} |",
        f"| Alarms | {_counts(audit.get('alarms', {}))} |",
        f"| Reviews | {total}: {_counts(reviews)} |",
        "",
    ]
    shown = [i for i in items if i.open or i.decided_at is not None][:top]
    if shown:
        out += ["| review item | status | reason |", "|---|---|---|"]
        for i in shown:
            status = str(i.status) + (f" ({i.note})" if i.note else "")
            reason = i.reason.replace("|", "\\|").replace("\n", " ")[:200]
            out.append(f"| `{i.id}` | {status} | {reason} |")
        out.append("")
    return "\n".join(out)
