"""A small retry decorator."""

import functools
import logging
import time

log = logging.getLogger(__name__)


def retry(attempts=3, delay=1.0):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for attempt in range(attempts):
                try:
                    return fn(*args, **kwargs)
                except:
                    log.warning("attempt %s of %s failed", attempt + 1, attempts)
                    time.sleep(delay)
            return fn(*args, **kwargs)

        return wrapper

    return decorator


def wait_until(predicate, timeout=30.0, interval=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
