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
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.payloads import Alarm, ModelDemoted, Route, SessionCreated, SessionPaused, SessionPreempted
from agent_fleet.supervise.port import ReviewItem

__all__ = ["AUDIT_TYPES", "audit_markdown", "decision_audit"]

AUDIT_TYPES = (EventType.SESSION_CREATED, EventType.ROUTE, EventType.SESSION_PAUSED, EventType.SESSION_PREEMPTED)


def _tier(route: Route) -> int:
    return TIERS.index(route.tier) if route.tier in TIERS else -1


def decision_audit(
    run_events: Sequence[Event], agent_events: Iterable[Event], items: Sequence[ReviewItem]
) -> dict[str, Any]:
    first_route: dict[str, Route] = {}
    last_route: dict[str, Route] = {}
    fallbacks: list[dict[str, Any]] = []
    escalations = 0
    pauses: Counter[str] = Counter()
    preemptions: Counter[str] = Counter()
    given: dict[str, str] = {}  # session → the model it was created with (a run without routing tiers)
    for ev in agent_events:
        p = decode(ev)
        if isinstance(p, SessionCreated):
            given[ev.session_id] = p.model
        elif isinstance(p, Route):
            sid = ev.session_id
            if sid not in first_route:
                first_route[sid] = last_route[sid] = p
                continue
            before = last_route[sid]
            up = _tier(p) > _tier(before) >= 0
            escalations += up
            fallbacks.append(
                {
                    "session_id": sid,
                    "from": before.name or before.model,
                    "to": p.name or p.model,
                    "escalation": up,
                    "reason": p.reason,
                }
            )
            last_route[sid] = p
        elif isinstance(p, SessionPaused):
            pauses["paused" if p.reason is None else p.reason] += 1
        elif isinstance(p, SessionPreempted):
            preemptions[p.reason or "preempted"] += 1
    routes = Counter(r.name or r.model for r in first_route.values())
    routes.update(m for sid, m in given.items() if sid not in first_route and m)
    run_payloads = [decode(e) for e in run_events]
    demotions = [{"model": p.model, "reasons": list(p.reasons)} for p in run_payloads if isinstance(p, ModelDemoted)]
    alarms = Counter(p.kind for p in run_payloads if isinstance(p, Alarm))
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
