"""A tiny on-disk cache for expensive report queries."""

import hashlib
import os
import pickle
import time

CACHE_DIR = "/tmp/stockroom-cache"
TTL_SECONDS = 300


def _path(key):
    digest = hashlib.sha1(key.encode()).hexdigest()
    return os.path.join(CACHE_DIR, digest + ".pkl")


def get(key):
    path = _path(key)
    try:
        if time.time() - os.path.getmtime(path) > TTL_SECONDS:
            return None
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except Exception:
        pass
    return None


def put(key, value):
    os.makedirs(CACHE_DIR, exist_ok=True)
    try:
        with open(_path(key), "wb") as fh:
            pickle.dump(value, fh)
    except Exception:
        pass


def clear():
    for name in os.listdir(CACHE_DIR):
        os.remove(os.path.join(CACHE_DIR, name))
