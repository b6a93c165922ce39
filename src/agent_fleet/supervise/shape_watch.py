"""Shape alarms while a run is live, for fleet.yaml ``supervision.shape.pause``.

:class:`ShapeWatch` folds every durable event of its run into the per-session tallies as it is
recorded (O(1) an event) and, when asked, names the sessions still running that sit far above the
run's median — each once. The engine pauses them; nothing here reads the log or a clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_fleet.config import ShapePolicy
from agent_fleet.domain.events import Event, EventType
from agent_fleet.supervise.port import ShapeAlarm
from agent_fleet.supervise.shape import SessionShape, outliers

__all__ = ["ShapeWatch"]

_ENDED = frozenset({EventType.SESSION_COMPLETED, EventType.SESSION_FAILED, EventType.SESSION_PAUSED})
_GOES_ON = frozenset({EventType.SESSION_STARTED, EventType.SESSION_RESUMED})


class ShapeWatch:
    def __init__(self, run_id: str, policy: ShapePolicy) -> None:
        self._prefix = run_id + "."
        self._policy = policy
        self.shapes: dict[str, SessionShape] = {}
        self._stopped: set[str] = set()  # sessions not running now
        self._alarmed: set[str] = set()
        self._changed = False

    def heard(self, events: Sequence[Event]) -> None:
        for ev in events:
            sid = ev.session_id
            if not sid.startswith(self._prefix):
                continue
            shape = self.shapes.get(sid)
            if shape is None:
                shape = self.shapes[sid] = SessionShape(sid)
            shape.fold(ev)
            if ev.type in _ENDED:
                self._stopped.add(sid)
            elif ev.type in _GOES_ON:
                self._stopped.discard(sid)
            self._changed = True

    def recorded(self, keys: Sequence[str]) -> None:
        """Alarms the log already holds (a resumed run): a session a human let go on is not paused again."""
        self._alarmed.update(keys)

    def due(self) -> list[ShapeAlarm]:
        """Outliers among the running sessions not named before (nothing when no event came since)."""
        if not self._changed:
            return []
        self._changed = False
        found = [
            a
            for a in outliers(self.shapes, self._policy)
            if a.session_id not in self._stopped and a.key not in self._alarmed
        ]
        self._alarmed.update(a.key for a in found)
        return found

    def __repr__(self) -> str:
        return f"<ShapeWatch sessions={len(self.shapes)} alarmed={len(self._alarmed)}>"
