"""BLAS held to one thread while a block of work runs (threadpoolctl; restored after the last user),
and that work spread over the CPUs by threads of our own.

The embedder's forward passes and the leader index's products are many and small: a second BLAS
thread does not pay for its wake-up on such a product (on a loaded machine it costs many times the
product), while independent products on threads of their own keep every CPU busy (numpy releases
the GIL inside them). Users nest and overlap across threads; the original limits come back when the
last one leaves.

OpenBLAS takes a limit only from the process's main thread: set from any other thread it does not
hold, there or anywhere (a forward pass in a worker thread then ran 8x the CPU of the same pass on
the main thread of a loaded two-core machine). So the asynchronous callers enter the limit on their
event loop's thread around the work they hand to a worker thread, and the ``agent-fleet`` command
sets ``OPENBLAS_NUM_THREADS=1`` before numpy loads (as :func:`one_blas_thread_by_default` does), which holds
on every thread, whatever thread its loop runs on.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["cpu_count", "one_blas_thread_by_default", "run_spread", "single_threaded_blas"]

T = TypeVar("T")
R = TypeVar("R")

_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0
_BLAS_LIMIT: Any = None


@functools.cache
def _controller() -> Any:
    """The BLAS libraries loaded, found once (finding them reads the process's memory map)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    global _BLAS_USERS, _BLAS_LIMIT
    with _BLAS_LOCK:
        if _BLAS_USERS == 0:
            _BLAS_LIMIT = _controller().limit(limits=1, user_api="blas")
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0 and _BLAS_LIMIT is not None:
                _BLAS_LIMIT.restore_original_limits()
                _BLAS_LIMIT = None


def one_blas_thread_by_default() -> None:
    """Before numpy loads: OpenBLAS starts with one thread unless the environment says otherwise (the
    work is spread over the CPUs by :func:`run_spread`'s threads instead)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_spread(fn: Callable[[T], R], tasks: Sequence[T], *, workers: int = 0, name: str = "blas") -> list[R]:
    """``fn`` over ``tasks`` (results in order) with BLAS held to one thread, on at most ``workers``
    threads (0: one per CPU); all have finished when it returns."""
    n = max(1, min(workers or cpu_count(), len(tasks)))
    with single_threaded_blas():
        if n == 1:
            return [fn(t) for t in tasks]
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix=name) as pool:
            return list(pool.map(fn, tasks))
