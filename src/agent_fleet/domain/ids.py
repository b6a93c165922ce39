"""Identifiers. Run ids sort by creation time; session ids derive from the run and the leaf index,
so a resumed run finds the very same sessions again."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_run_id", "session_id_for"]


def new_run_id(now: float | None = None) -> str:
    millis = int((time.time() if now is None else now) * 1000)
    return f"run-{millis:012x}{secrets.token_hex(3)}"


def session_id_for(run_id: str, index: int) -> str:
    return f"{run_id}.s{index:05d}"
