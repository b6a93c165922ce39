"""The garbage collector while an engine runs.

A fleet allocates a great many short-lived objects (events, requests, responses, tasks) beside a
large, long-lived heap (the plan, the session records, modules). CPython's default thresholds run a
young collection every 700 allocations and, every so often, a full one that walks the whole heap;
at a thousand sessions that is a fifth of the engine's CPU. While an engine is open, what exists
at its start is frozen out of the collector's view (``gc.freeze``) and young collections come
every 50,000 allocations. The engine's own garbage is freed by reference counting; cycles are
still collected, less often. The last engine to close puts the previous settings back.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ENGINE_THRESHOLDS", "tuned_collector"]

ENGINE_THRESHOLDS = (50_000, 20, 100)

_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def tuned_collector() -> Iterator[None]:
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(*ENGINE_THRESHOLDS)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                gc.unfreeze()
                _saved = None
