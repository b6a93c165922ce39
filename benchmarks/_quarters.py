"""Calls/s in each quarter of a run's calls: does the rate hold as the session log grows?

A pure function of the calls' times (``calls_per_s_by_quarter``) and the reader of those times from a
run's log (``call_times``): each agent model call is one ``model_response`` event, stamped when it was
recorded; the run's calls start with its first ``model_request``.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_fleet.domain.events import EventType
from agent_fleet.session.port import SessionLog

QUARTERS = 4


def calls_per_s_by_quarter(start: float, ends: Sequence[float], parts: int = QUARTERS) -> list[float]:
    """Calls/s in each of ``parts`` equal shares of the calls, in the order they ended.

    Calls are split by count (``len(ends) * q // parts`` onwards is share ``q``); a share lasts from
    the end of the previous share's last call (``start`` for the first) to the end of its own last
    call, so the shares' durations add up to the run's span. A share of no calls, or of no duration,
    has no rate: it is 0.0 (no calls) or ``inf`` (calls in no time)."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    times = sorted(ends)
    if times and times[0] < start:
        raise ValueError("a call ended before the run's calls started")
    rates: list[float] = []
    since = start
    for q in range(parts):
        lo, hi = len(times) * q // parts, len(times) * (q + 1) // parts
        if hi == lo:
            rates.append(0.0)
            continue
        until = times[hi - 1]
        span = until - since
        rates.append((hi - lo) / span if span > 0 else float("inf"))
        since = until
    return rates


async def call_times(log: SessionLog, run_id: str) -> tuple[float, list[float]]:
    """(when the run's first agent model call was sent, when each call's answer was recorded)."""
    events = await log.events_of_run(run_id, [EventType.MODEL_REQUEST, EventType.MODEL_RESPONSE])
    sent = [e.time for e in events if e.type == EventType.MODEL_REQUEST]
    ends = [e.time for e in events if e.type == EventType.MODEL_RESPONSE]
    if not sent:
        return (min(ends) if ends else 0.0), ends
    return min(sent), ends
