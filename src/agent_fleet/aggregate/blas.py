"""BLAS held to one thread while a block of work runs (threadpoolctl; restored after the last user).

The embedder's forward pass runs in its own worker threads, and the leader index's products are
too small for a second BLAS thread to pay for its wake-up: both want one BLAS thread. Users nest
and overlap across threads; the original limits come back when the last one leaves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["single_threaded_blas"]

_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0
_BLAS_LIMIT: Any = None


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    global _BLAS_USERS, _BLAS_LIMIT
    with _BLAS_LOCK:
        if _BLAS_USERS == 0:
            from threadpoolctl import threadpool_limits

            _BLAS_LIMIT = threadpool_limits(limits=1, user_api="blas")
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0 and _BLAS_LIMIT is not None:
                _BLAS_LIMIT.restore_original_limits()
                _BLAS_LIMIT = None
