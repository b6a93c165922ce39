"""Store faults under a real run: PostgreSQL connections terminated mid-run, and a full disk.

No traceback; the run either continues or stops with exit 4 and one line; ``resume`` then
completes with every result once.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store

from .conftest import Cli, write_lines

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

PG = "postgresql://postgres@127.0.0.1:5432/test"
ITEMS, AGENTS = 400, 40


async def _every_result_once(store: str, run_id: str) -> None:
    async with open_store(store) as log:
        events = await log.events_of_run(run_id, [EventType.RESULT_ITEM, EventType.SESSION_COMPLETED])
    completed = Counter(e.session_id for e in events if e.type == EventType.SESSION_COMPLETED)
    assert len(completed) == AGENTS and set(completed.values()) == {1}
    results = Counter((e.session_id, e.data["body"]) for e in events if e.type == EventType.RESULT_ITEM)
    assert len(results) == ITEMS and set(results.values()) == {1}


async def _started(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
    assert line.startswith("agent-fleet: run "), line
    return line.split()[2]


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [x for x in err.splitlines() if x.startswith("agent-fleet: error")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.postgres
async def test_terminated_postgresql_connections_mid_run(slow_cli: Cli, tmp_path: Path) -> None:
    schema, app = f"fleet_e2e_{secrets.token_hex(4)}", f"fleet_e2e_{secrets.token_hex(4)}"
    store = f"{PG}?schema={schema}&application_name={app}"
    src = write_lines(tmp_path / "urls.txt", ITEMS)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", str(AGENTS), "--embedder", "lexical")
    admin = await asyncpg.connect(PG)
    try:
        proc = slow_cli.popen("deploy", *args, "--json", FLEET_STORE=store)
        run_id = await _started(proc)
        killed = 0
        while proc.poll() is None:
            rows = await admin.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app
            )
            killed += sum(1 for r in rows if r[0])
            await asyncio.sleep(0.3)
        _, err = proc.communicate()
        assert killed >= 3, "no connection was cut mid-run"
        assert "Traceback" not in err, err
        if proc.returncode != 0:  # the store stayed away past its deadline: one line, exit 4, resumable
            assert proc.returncode == 4 and "session store" in _one_line(err)
            again = slow_cli.run("resume", run_id, "--json", FLEET_STORE=store)
            assert again.returncode == 0, again.stderr
        await _every_result_once(store, run_id)
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mount)], capture_output=True)
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
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


async def test_a_full_disk_stops_the_run_with_exit_4_and_resume_completes(
    slow_cli: Cli, tmp_path: Path, small_disk: Path
) -> None:
    store = f"sqlite:///{small_disk / 'fleet.db'}?retry_s=2"
    src = write_lines(tmp_path / "urls.txt", ITEMS)
    args = ("--task", "Summarise each page", "--input", str(src), "--agents", str(AGENTS), "--embedder", "lexical")
    proc = slow_cli.popen("deploy", *args, "--json", FLEET_STORE=store)
    run_id = await _started(proc)
    await asyncio.sleep(1.0)
    filler = await asyncio.to_thread(_fill, small_disk)
    _, err = await asyncio.to_thread(proc.communicate, timeout=120)
    assert proc.returncode == 4, err
    line = _one_line(err)
    assert line.startswith("agent-fleet: error: session store unavailable") and "disk is full" in line, line
    await asyncio.to_thread(filler.unlink)
    again = slow_cli.run("resume", run_id, "--json", FLEET_STORE=store)
    assert again.returncode == 0, again.stderr
    await _every_result_once(store, run_id)
