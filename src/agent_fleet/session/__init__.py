"""The session log: an append-only event store outside the brain and the hands."""

from agent_fleet.session.port import SessionLog, WakeState

__all__ = ["SessionLog", "WakeState"]
