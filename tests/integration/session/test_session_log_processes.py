"""Several processes appending to one store: seqs stay unique and gap-free.

SQLite: a live log keeps writing while a second process opens the same file and appends to the
same session (``agent-fleet budget raise`` during a run). PostgreSQL: several processes append to
the same sessions at once (scale-out).

Run directly, this file is the appending child:
``python test_session_log_processes.py STORE_URL TAG COUNT SESSION [SESSION...]``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.domain.events import Event
from agent_fleet.session import SessionLog, open_store
from agent_fleet.testing.processes import reaped_async

PG_URL = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _append(url: str, tag: str, count: int, sessions: list[str]) -> None:
    async with open_store(url) as log:

        async def one_session(sid: str) -> None:
            for i in range(count):
                event = await log.emit_event(sid, "budget_raised", {"by": tag, "i": i})
                print(f"{event.session_id} {event.seq} {tag} {i}", flush=True)

        async with asyncio.TaskGroup() as group:
            for sid in sessions:
                group.create_task(one_session(sid))


async def _run_child(url: str, tag: str, count: int, sessions: list[str]) -> list[tuple[str, int, str, int]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        url,
        tag,
        str(count),
        *sessions,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with reaped_async(proc):  # killed if the wait times out
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    return [(sid, int(seq), by, int(i)) for sid, seq, by, i in (line.split() for line in out.decode().splitlines())]


def _acks(events: list[Event]) -> list[tuple[str, int, str, int]]:
    return [(e.session_id, e.seq, e.data["by"], e.data["i"]) for e in events]


async def _check(log: SessionLog, sessions: list[str], acks: list[tuple[str, int, str, int]]) -> None:
    """Every stored event was acknowledged to exactly one writer, under the seq it was given."""
    for sid in sessions:
        stored = _acks(await log.get_events(sid))
        assert [seq for _, seq, _, _ in stored] == list(range(1, len(stored) + 1)), f"gap in {sid}"
        assert sorted(a for a in acks if a[0] == sid) == stored
        record = await log.get_session(sid)
        assert record is not None and record.last_seq == len(stored)


async def test_a_second_process_appends_to_a_live_sqlite_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    shared = "run-live.s00000"
    sessions = [shared, "run-live.s00001", "run-live.s00002"]
    acks: list[tuple[str, int, str, int]] = []
    async with open_store(url) as log:
        await log.emit_event(shared, "session_created", {"run_id": "run-live", "by": "live", "i": -1})
        acks.append((shared, 1, "live", -1))
        stop = asyncio.Event()

        async def live(sid: str) -> None:
            i = 0
            while not stop.is_set():
                acks.extend(_acks([await log.emit_event(sid, "tool_call", {"by": "live", "i": i})]))
                i += 1

        async with asyncio.TaskGroup() as group:
            for sid in sessions:
                group.create_task(live(sid))
            try:
                acks.extend(await _run_child(url, "cli", 40, [shared]))
            finally:
                stop.set()
        assert sum(1 for a in acks if a[2] == "cli") == 40
        assert sum(1 for a in acks if a[2] == "live") > 40  # the live writer kept going meanwhile
        await _check(log, sessions, acks)
        # The live log's counter follows the other process's appends.
        last = (await log.get_session(shared)).last_seq  # type: ignore[union-attr]
        assert (await log.emit_event(shared, "after", {"by": "live", "i": 0})).seq == last + 1


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    schema = f"fleet_proc{os.getpid()}_{secrets.token_hex(4)}"
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        conn = await asyncpg.connect(PG_URL)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


@pytest.mark.postgres
async def test_processes_append_to_the_same_postgres_sessions_at_once(pg_url: str) -> None:
    sessions = [f"run-scale.s{i:05d}" for i in range(4)]
    results = await asyncio.gather(*(_run_child(pg_url, f"p{n}", 60, sessions) for n in range(3)))
    acks = [a for result in results for a in result]
    assert len(acks) == 3 * 60 * len(sessions)
    async with open_store(pg_url) as log:
        await _check(log, sessions, acks)
        assert all(r.last_seq == 180 for r in await asyncio.gather(*(log.get_session(s) for s in sessions)))  # type: ignore[union-attr]


if __name__ == "__main__":
    asyncio.run(_append(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]))
