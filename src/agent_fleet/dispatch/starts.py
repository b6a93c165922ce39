"""How many sessions may be starting at once: from waking to their first model call.

A run admits its sessions at once, but the gateway serves only so many calls at a time; starting a
thousand sessions together makes every one of them take each step of its start (wake, record the
start, record the request) behind the other 999, so the first call leaves late and the gateway's
slots stand idle. Sessions pass the :class:`StartGate` a bounded number at a time, in the order
they reach it; each leaves it at its first model call (or when its attempt ends), so the sessions
that will fill the gateway's slots first are the ones that start first.
"""

from __future__ import annotations

from agent_fleet.capacity import CapacityLimiter

__all__ = ["StartGate"]


class StartGate(CapacityLimiter):
    """At most ``total`` sessions starting at once, admitted in the order they come.

    A session takes a permit (``acquire(session_id)``) before its attempt, marks it used as the
    attempt begins and releases it at its first model call or when the attempt ends.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit, name="start places")
