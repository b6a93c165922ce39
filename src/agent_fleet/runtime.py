"""The interpreter's settings while an engine runs: the garbage collector and the GIL switch.

A fleet allocates a great many short-lived objects (events, requests, responses, tasks) beside a
large, long-lived heap (the plan, the session records, modules). CPython's default thresholds run a
young collection every 700 allocations and, every so often, a full one that walks the whole heap;
at a thousand sessions that is a fifth of the engine's CPU. While an engine is open, what exists
at its start is frozen out of the collector's view (``gc.freeze``) and young collections come
every 50,000 allocations. The engine's own garbage is freed by reference counting; cycles are
still collected, less often.

The event loop shares the interpreter with worker threads (live deduplication, the session log's
writer). When the loop wakes for a response while a worker runs Python code, it waits for the
worker to hand over the GIL — up to the switch interval, 5 ms by default, on every wake. While an
engine is open the interval is 0.5 ms, which took ~2 ms off every model call's latency in
``benchmarks/throughput.py``.

The last engine to close puts the previous settings back.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ENGINE_GC_THRESHOLDS", "ENGINE_SWITCH_INTERVAL", "tuned_runtime"]

ENGINE_GC_THRESHOLDS = (50_000, 20, 100)
ENGINE_SWITCH_INTERVAL = 0.0005

_lock = threading.Lock()
_users = 0
_saved: tuple[tuple[int, int, int], float] | None = None


@contextmanager
def tuned_runtime() -> Iterator[None]:
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = (gc.get_threshold(), sys.getswitchinterval())
            gc.freeze()
            gc.set_threshold(*ENGINE_GC_THRESHOLDS)
            sys.setswitchinterval(ENGINE_SWITCH_INTERVAL)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                thresholds, interval = _saved
                gc.set_threshold(*thresholds)
                sys.setswitchinterval(interval)
                gc.unfreeze()
                _saved = None
