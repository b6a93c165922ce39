"""An acknowledged event survives ``kill -9``.

A child process emits events as fast as it can from many concurrent sessions and prints each
acknowledged ``session seq`` to stdout; the test SIGKILLs it mid-stream, reopens the store and
checks that every acknowledged event is there and every session's seqs run 1..last without gaps.

Run directly, this file is the child: ``python test_session_log_kill.py STORE_URL``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import selectors
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from agent_fleet.session import SessionLog, open_store

# A kill test: a process is killed and its leftovers checked; selected with -m slow, bounded on its own.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PG_URL = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
EMITTERS = 40
ACKS_BEFORE_KILL = 3000


async def _emit_forever(url: str) -> None:
    out = sys.stdout

    async def emitter(log: SessionLog, k: int) -> None:
        sid = f"run-kill.s{k:05d}"
        i = 0
        while True:
            if i % 4 == 3:
                events = await log.emit_events(sid, [("tool_call", {"i": i}), ("tool_result", {"i": i})])
            else:
                events = [await log.emit_event(sid, "tool_call", {"i": i})]
            # Printed only after the store acknowledged the events.
            out.write("".join(f"{e.session_id} {e.seq}\n" for e in events))
            out.flush()
            i += 1

    async with open_store(url) as log, asyncio.TaskGroup() as group:
        for k in range(EMITTERS):
            group.create_task(emitter(log, k))


def _read_acks_then_kill(proc: subprocess.Popen[bytes], deadline_s: float = 60.0) -> list[tuple[str, int]]:
    assert proc.stdout is not None
    buffer = b""
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + deadline_s
    try:
        while buffer.count(b"\n") < ACKS_BEFORE_KILL:
            if time.monotonic() > deadline or proc.poll() is not None:
                stderr = proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ""
                pytest.fail(f"the emitting child did not produce {ACKS_BEFORE_KILL} acks in time: {stderr[-2000:]}")
            if selector.select(timeout=1.0):
                buffer += os.read(proc.stdout.fileno(), 1 << 16)
    finally:
        selector.close()
        proc.kill()  # SIGKILL, mid-stream
        proc.wait()
    buffer += proc.stdout.read()  # everything printed before death is still in the pipe
    lines = buffer.decode().splitlines()
    if lines and not buffer.endswith(b"\n"):
        lines.pop()  # a line cut by the kill
    return [(sid, int(seq)) for sid, seq in (line.split() for line in lines)]


async def _check_store(url: str, acks: list[tuple[str, int]]) -> None:
    acked: dict[str, set[int]] = defaultdict(set)
    for sid, seq in acks:
        assert seq not in acked[sid], f"seq {seq} acknowledged twice in {sid}"
        acked[sid].add(seq)
    async with open_store(url) as log:
        for sid, seqs in acked.items():
            events = await log.get_events(sid)
            stored = [e.seq for e in events]
            assert stored == list(range(1, len(stored) + 1)), f"gap in {sid}"
            assert seqs <= set(stored), f"acknowledged events lost in {sid}: {sorted(seqs - set(stored))[:10]}"
            record = await log.get_session(sid)
            assert record is not None and record.last_seq == len(stored)
            # The payload written with each seq is the one stored under it.
            assert [e.data["i"] for e in events] == sorted(e.data["i"] for e in events)
        # The reopened store keeps appending where the log ends.
        first = next(iter(acked))
        assert (await log.emit_event(first, "after_crash")).seq == len(await log.get_events(first))


def _kill_and_check(url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, __file__, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    acks = _read_acks_then_kill(proc)
    assert len(acks) >= ACKS_BEFORE_KILL
    asyncio.run(_check_store(url, acks))


def test_acknowledged_events_survive_kill_9_sqlite(tmp_path: Path) -> None:
    _kill_and_check(f"sqlite:///{tmp_path / 'fleet.db'}")


@pytest.mark.postgres
def test_acknowledged_events_survive_kill_9_postgres() -> None:
    import asyncpg

    schema = f"fleet_kill{os.getpid()}_{secrets.token_hex(4)}"
    try:
        _kill_and_check(f"{PG_URL}?schema={schema}")
    finally:

        async def drop() -> None:
            conn = await asyncpg.connect(PG_URL)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()

        asyncio.run(drop())


if __name__ == "__main__":
    asyncio.run(_emit_forever(sys.argv[1]))
