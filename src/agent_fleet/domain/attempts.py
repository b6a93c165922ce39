"""Why an attempt at a session ended without an outcome: the ``kind`` of an ``attempt_failed`` event.

Dispatch writes these, the run summary and the status command read them; the string values are what
the session log stores, so they never change.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SESSION_FAULTS", "WORKER_FAULTS", "AttemptKind"]


class AttemptKind(StrEnum):
    CRASH = "crash"  # the attempt raised: its worker is charged
    HUNG = "hung"  # its worker made no progress for the health check's hung_after
    DEAD = "dead"  # its worker stopped sending heartbeats
    TIMEOUT = "timeout"  # the session's own per-attempt timeout
    PROVIDER = "provider"  # the model provider failed past the gateway's retries
    AGENT = "agent"  # a CLI agent failed (non-zero exit, an error it reported)
    CONFIG = "config"  # a misconfiguration no other worker can fix: the session fails at once
    MOVED = "moved"  # its worker was about to fail: moved to a backup, nobody charged
    PREEMPTED = "preempted"  # admission took the slot back


WORKER_FAULTS = frozenset({AttemptKind.CRASH, AttemptKind.HUNG, AttemptKind.DEAD})
"""Charged to the worker; they count as reassignments."""

SESSION_FAULTS = frozenset({AttemptKind.TIMEOUT, AttemptKind.PROVIDER, AttemptKind.AGENT})
"""On the session's own account; they count toward its attempts."""
