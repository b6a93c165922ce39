"""How many sessions may be starting at once: from waking to their first model call.

A run admits its sessions at once, but the gateway serves only so many calls at a time; starting a
thousand sessions together makes every one of them take each step of its start (wake, record the
start, record the request) behind the other 999, so the first call leaves late and the gateway's
slots stand idle. Sessions pass the :class:`StartGate` a bounded number at a time, in the order
they reach it; each leaves it at its first model call (or when its attempt ends), so the sessions
that will fill the gateway's slots first are the ones that start first.

Past its start a session waits for the gateway on every turn, holding what its harness rebuilt from
the log (the conversation, the attempt's views of the ports, the tasks that drive it). A run that
admits ten thousand sessions would hold ten thousand of those while the gateway serves fifty calls at
a time, for nothing: a session waiting for a call is as well kept by the log alone. The
:class:`Residence` bounds how many sessions are woken at once (from waking to the end of their
attempt); the others wait before waking, holding only their place in the dispatcher.
"""

from __future__ import annotations

from agent_fleet.capacity import CapacityLimiter

__all__ = ["RESIDENT_PER_CALL", "Residence", "StartGate", "resident_places"]

# Woken sessions per gateway slot. A run of no more sessions than that wakes them all, and its calls go
# out in the order the gateway serves them anyway: every session moves a turn at a time, and the last
# calls leave together. Bounding a run of more sessions lets the last ones woken finish their turns after
# the others: a tail of a few calls' time, a small share of a run that large.
RESIDENT_PER_CALL = 40
RESIDENT_MIN = 64


class StartGate(CapacityLimiter):
    """At most ``total`` sessions starting at once, admitted in the order they come.

    A session takes a permit (``acquire(session_id)``) before its attempt, marks it used as the
    attempt begins and releases it at its first model call or when the attempt ends.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit, name="start places")


class Residence(CapacityLimiter):
    """At most ``total`` sessions woken at once (a harness rebuilt from the log), in the order they come.

    A session takes a place (``acquire(session_id)``) before it takes a worker and keeps it while it
    holds its admission slot; it gives it back when it leaves the slot (ended, paused, preempted, or
    backing off before its next attempt).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(limit, name="resident places")


def resident_places(concurrency: int) -> int:
    """Resident places for a gateway of ``concurrency`` calls at once: enough that every slot has a
    session ready for it while the others run their tools or record their turns."""
    return max(RESIDENT_MIN, RESIDENT_PER_CALL * concurrency)
