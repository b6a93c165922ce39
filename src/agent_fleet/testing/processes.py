"""Processes a test starts end with it: stopped politely, then killed by pid when a wait runs out.

A fixture that sends SIGINT or SIGTERM and waits would leave the process running if the wait timed
out (a server stuck in its shutdown): these helpers follow every timed-out wait with SIGKILL of the
process (or of its whole process group, for one started with ``start_new_session=True``) and reap
it, so nothing a test started outlives the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

__all__ = ["kill_now", "reaped", "reaped_async", "stop", "stop_async"]


def _signal(pid: int, sig: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def kill_now(pid: int, *, group: bool = False) -> None:
    """SIGKILL the process (its group with ``group``); a process already gone is no error."""
    _signal(pid, signal.SIGKILL, group=group)


def stop(
    proc: subprocess.Popen[Any], *, sig: int = signal.SIGTERM, timeout: float = 30, group: bool = False
) -> tuple[Any, Any]:
    """Send ``sig`` unless it already ended, wait up to ``timeout`` s for it (reading its pipes), then
    SIGKILL it by pid and reap it. Returns what ``communicate`` read (``(None, None)`` when the pipes
    were already closed)."""
    if proc.poll() is None:
        _signal(proc.pid, sig, group=group)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_now(proc.pid, group=group)
        return proc.communicate()
    except ValueError:  # its pipes were read and closed already
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_now(proc.pid, group=group)
            proc.wait()
        return None, None
    finally:
        if group:  # the group may hold children of the process that outlive it
            kill_now(proc.pid, group=True)


async def stop_async(
    proc: asyncio.subprocess.Process, *, sig: int = signal.SIGTERM, timeout: float = 30, group: bool = False
) -> tuple[bytes, bytes]:
    """:func:`stop` for an asyncio subprocess."""
    if proc.returncode is None:
        _signal(proc.pid, sig, group=group)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        kill_now(proc.pid, group=group)
        out, err = await proc.communicate()
    finally:
        if group:
            kill_now(proc.pid, group=True)
    return out or b"", err or b""


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[Any], *, group: bool = False) -> Iterator[subprocess.Popen[Any]]:
    """On the way out (a failed assertion, a timed-out wait) a process still running is killed."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            kill_now(proc.pid, group=group)
            with contextlib.suppress(ValueError):
                proc.communicate()
        elif group:
            kill_now(proc.pid, group=True)


@contextlib.asynccontextmanager
async def reaped_async(
    proc: asyncio.subprocess.Process, *, group: bool = False
) -> AsyncIterator[asyncio.subprocess.Process]:
    """:func:`reaped` for an asyncio subprocess."""
    try:
        yield proc
    finally:
        if proc.returncode is None:
            kill_now(proc.pid, group=group)
            await proc.wait()
        elif group:
            kill_now(proc.pid, group=True)
