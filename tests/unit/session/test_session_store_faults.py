"""Store faults: a full disk (SQLite on a small tmpfs) and PostgreSQL connections terminated mid-write.

Writes are retried on a fresh connection until the store's ``retry_s`` deadline; an acknowledged
event is stored exactly once; past the deadline the write fails with StoreUnavailable (exit 4).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.errors import FleetError, StoreUnavailable, cause_of
from agent_fleet.session import open_store
from agent_fleet.session._retry import RetryPolicy

PG = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


# -- the policy (pure) ----------------------------------------------------------------------------


def test_pauses_double_up_to_the_cap_then_the_deadline_gives_up() -> None:
    t = [0.0]
    policy = RetryPolicy(deadline_s=5.0, first_pause_s=0.5, max_pause_s=2.0, now=lambda: t[0])
    tries = policy.start("write")
    pauses = []
    with pytest.raises(StoreUnavailable, match=r"unavailable for 3\.5 s \(4 tries\): disk full; .* can be resumed"):
        while True:
            pause = tries.pause_after("disk full")
            pauses.append(pause)
            t[0] += pause
    assert pauses == [0.5, 1.0, 2.0]  # 3.5 s waited; a 2 s pause would end past the 5 s deadline
    # degraded: the next operation gets one try, until one succeeds
    with pytest.raises(StoreUnavailable, match=r"^session store unavailable: disk full; the run stopped"):
        policy.start("write").pause_after("disk full")
    policy.succeeded()
    assert policy.start("write").pause_after("blip") == 0.5


def test_an_exception_group_stands_for_its_first_fleet_error() -> None:
    inner = StoreUnavailable("session store unavailable")
    group = ExceptionGroup("tg", [ValueError("x"), ExceptionGroup("nested", [RuntimeError("y"), inner])])
    assert cause_of(group) is inner
    plain = ExceptionGroup("tg", [RuntimeError("first"), ValueError("second")])
    assert str(cause_of(plain)) == "first"
    assert cause_of(inner) is inner


# -- SQLite: a full disk --------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        except OSError:
            pass
    return filler


async def test_a_full_disk_fails_the_write_past_the_deadline_and_the_store_recovers(small_disk: Path) -> None:
    async with open_store(f"sqlite:///{small_disk / 'fleet.db'}?retry_s=0.6") as log:
        await log.emit_event("run-x", "run_created", {"n": 0})
        filler = _fill(small_disk)
        seq = 1
        with pytest.raises(StoreUnavailable) as caught:
            for n in range(1, 10_000):  # the WAL grows until the disk refuses a page
                seq = (await log.emit_event("run-x", "note", {"n": n, "pad": "x" * 3000})).seq
        assert "database or disk is full" in str(caught.value) and "\n" not in str(caught.value)
        assert caught.value.exit_code == 4
        assert "(4 tries)" in str(caught.value)  # 0.05 + 0.1 + 0.2 s of pauses; a 0.4 s one would pass 0.6 s
        filler.unlink()
        # the refused write is not there; the next one follows without a gap
        after = await log.emit_event("run-x", "note", {"n": "after"})
        assert after.seq == seq + 1
        events = await log.get_events("run-x")
        assert [e.seq for e in events] == list(range(1, seq + 2))


async def test_a_write_waiting_on_a_full_disk_lands_once_when_space_comes_back(small_disk: Path) -> None:
    async with open_store(f"sqlite:///{small_disk / 'fleet.db'}?retry_s=20") as log:
        await log.emit_event("run-y", "run_created", {})
        filler = _fill(small_disk)
        big = {"pad": "y" * 200_000}  # does not fit while the disk is full

        async def free_soon() -> None:
            await asyncio.sleep(0.5)
            filler.unlink()

        event, _ = await asyncio.gather(log.emit_event("run-y", "note", big), free_soon())
        assert event.seq == 2
        assert [e.seq for e in await log.get_events("run-y")] == [1, 2]


# -- PostgreSQL: connections terminated mid-write -------------------------------------------------


@pytest.fixture
async def pg_store() -> Iterator[tuple[str, str]]:  # type: ignore[misc]
    schema = f"fleet_fault_{secrets.token_hex(4)}"
    app = f"fleet_fault_{secrets.token_hex(4)}"
    yield f"{PG}?schema={schema}&application_name={app}&retry_s=20", app
    conn = await asyncpg.connect(PG)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def _terminate(app: str) -> int:
    conn = await asyncpg.connect(PG)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app
        )
    finally:
        await conn.close()
    return sum(1 for r in rows if r[0])


@pytest.mark.postgres
async def test_terminated_connections_lose_and_double_nothing(pg_store: tuple[str, str]) -> None:
    url, app = pg_store
    sessions, per_session = 10, 30
    async with open_store(url) as log:
        stop = asyncio.Event()
        killed = 0

        written = [0] * sessions

        async def writer(i: int) -> None:
            n = 0
            while n < per_session or not stop.is_set():  # until every cut has happened under the writes
                await log.emit_event(f"run-f.s{i:05d}", "note" if n else "session_created", {"run_id": "run-f", "n": n})
                n += 1
            written[i] = n

        async def terminator() -> None:  # eight rounds of cuts, 0.3 s apart
            nonlocal killed
            for _ in range(8):
                await asyncio.sleep(0.3)
                killed += await _terminate(app)
            stop.set()

        await asyncio.gather(terminator(), *(writer(i) for i in range(sessions)))
        assert killed >= 5
        for i in range(sessions):
            events = await log.get_events(f"run-f.s{i:05d}")
            assert [(e.seq, e.data["n"]) for e in events] == [(n + 1, n) for n in range(written[i])]


@pytest.mark.postgres
async def test_a_retry_after_a_lost_commit_finds_its_rows_instead_of_writing_them_twice(
    pg_store: tuple[str, str],
) -> None:
    from agent_fleet.session.postgres import _Attempt

    url, _ = pg_store
    async with open_store(url) as log:
        await log.emit_event("run-g", "run_created", {})
        attempt = _Attempt()
        loop = asyncio.get_running_loop()
        from agent_fleet.session._codec import AppendRequest, encode_data

        value, text = encode_data({"k": 1})
        request = AppendRequest("run-g", (("note", value, text),), loop.create_future())
        await log._commit([request], [], attempt)  # type: ignore[union-attr]
        assert attempt.outcomes is not None and attempt.rows[0][:2] == ("run-g", 2)
        assert await log._landed(attempt)  # type: ignore[union-attr]
        never = _Attempt(rows=[("run-g", 3, "note", 1.5, "{}")], outcomes=[])
        assert not await log._landed(never)  # type: ignore[union-attr]


async def test_an_unreachable_store_past_its_deadline_is_one_line_exit_4() -> None:
    log = open_store("postgresql://postgres@127.0.0.1:1/none?retry_s=0")
    with pytest.raises(FleetError) as caught:
        await log.open()
    assert caught.value.exit_code == 4 and "\n" not in str(caught.value)
