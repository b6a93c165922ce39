"""Runs on a local Ray cluster: a head (no CPUs for sessions) and two worker nodes, each a ``ray start``
of its own on 127.0.0.1, the session log in PostgreSQL, the simulated provider behind the run's one
gateway service.

* 1,000 sessions (``FLEET_RAY_SESSIONS`` scales it) spread over both nodes complete with every result
  recorded once, and the provider never sees more calls in flight than the one cap.
* One worker node killed mid-run (its raylet and its workers, ``kill -9`` of its process group): the
  run completes on the other node, nothing lost or doubled, and no write of the killed node's attempts
  lands after the engine declared them lost.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

pytest.importorskip("ray")

from agent_fleet.domain.events import EventType
from agent_fleet.engine import Engine, RunOptions, deploy
from agent_fleet.session import open_store
from agent_fleet.sim.provider import FixedLatency, SimConfig, SimProvider
from agent_fleet.testing.ray_cluster import LocalRayCluster

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

PG = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
SESSIONS = int(os.environ.get("FLEET_RAY_SESSIONS", "1000"))
CAP = 50


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster.start(workers=2, head_cpus=0, worker_cpus=1) as c:
        yield c


@pytest.fixture
async def store() -> AsyncIterator[str]:
    schema = f"fleet_ray_{secrets.token_hex(4)}"
    try:
        yield f"{PG}?schema={schema}"
    finally:
        conn = await asyncpg.connect(PG)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


def _options(tmp_path: Path, n: int, sim: SimProvider, cluster: LocalRayCluster) -> RunOptions:
    items = tmp_path / "items.txt"
    items.write_text("".join(f"item {i}: check this one\n" for i in range(n)))
    return RunOptions(
        task="Classify each item",
        input_path=str(items),
        agents=n,
        provider=sim.base_url,
        executor=f"ray://{cluster.address}",
        max_concurrency=CAP,
        embedder="lexical",
        out_dir=str(tmp_path / "out"),
    )


async def _each_once(store: str, run_id: str, n: int) -> dict[str, list[Any]]:
    """Every session completed exactly once with exactly one result; returns each session's events."""
    by_session: dict[str, list[Any]] = {}
    async with open_store(store) as log:
        for ev in await log.events_of_run(run_id):
            by_session.setdefault(ev.session_id, []).append(ev)
    assert len(by_session) == n
    for sid, events in by_session.items():
        kinds = Counter(e.type for e in events)
        assert kinds[EventType.SESSION_COMPLETED] == 1, (sid, kinds)
        assert kinds[EventType.RESULT_ITEM] == 1, (sid, kinds)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return by_session


async def test_a_run_spread_over_the_nodes_completes_once_under_one_cap(
    cluster: LocalRayCluster, store: str, tmp_path: Path
) -> None:
    engines: list[Engine] = []
    async with SimProvider(SimConfig(latency=FixedLatency(seconds=0.05), seed=3)) as sim:
        options = _options(tmp_path, SESSIONS, sim, cluster)
        report = await deploy(options, store_url=store, api_key="sk-ray", on_start=lambda _r, e: engines.append(e))
        stats = sim.stats()
    assert report.status == "completed", report.summary
    assert report.summary["sessions"]["completed"] == SESSIONS and report.summary["results_raw"] == SESSIONS
    assert 0 < stats["max_in_flight"] <= CAP
    ray = engines[0].workforce.ray if engines[0].workforce else None
    assert ray is not None and len(ray.workers) == 2  # one node worker per worker node, none on the head
    placed = sum((b.placed for b in ray.bodies), Counter())
    assert sum(placed.values()) == SESSIONS
    assert all(placed[w] >= SESSIONS // 10 for w in ray.workers), placed  # both nodes ran sessions
    assert ray.service.requests["ok"] == 2 * SESSIONS  # every session call passed the one gateway service
    await _each_once(store, report.run_id, SESSIONS)


async def test_a_killed_worker_node_loses_nothing_and_writes_nothing_late(
    cluster: LocalRayCluster, store: str, tmp_path: Path
) -> None:
    n = max(200, SESSIONS // 5)
    engines: list[Engine] = []
    async with SimProvider(SimConfig(latency=FixedLatency(seconds=0.4), seed=4)) as sim:
        options = _options(tmp_path, n, sim, cluster)
        run = asyncio.create_task(
            deploy(options, store_url=store, api_key="sk-ray", on_start=lambda _r, e: engines.append(e))
        )
        while not engines or sim.stats()["requests"].get("/v1/chat/completions", {}).get("200", 0) < n // 2:
            await asyncio.sleep(0.1)
            assert not run.done(), run.result()
        victim = cluster.worker_nodes()[0]
        cluster.kill_node(victim)  # its raylet and every worker process, at once
        report = await asyncio.wait_for(run, 400)
    assert report.status == "completed", report.summary
    assert report.summary["sessions"]["completed"] == n and report.summary["results_raw"] == n
    by_session = await _each_once(store, report.run_id, n)
    failed = [(sid, e) for sid, events in by_session.items() for e in events if e.type == EventType.ATTEMPT_FAILED]
    assert failed, "the killed node ran sessions: some attempts were lost and moved"
    lost_workers = {e.data["worker"] for _, e in failed}
    assert len(lost_workers) == 1
    for sid, events in by_session.items():
        # after the engine declared an attempt lost, the next write is the next attempt's first: its start
        # (started, if the lost one wrote nothing), or the charge of the call the lost attempt had in flight
        first = (EventType.SESSION_STARTED, EventType.SESSION_RESUMED, EventType.MODEL_RESENT)
        for i, e in enumerate(events):
            if e.type == EventType.ATTEMPT_FAILED and i + 1 < len(events):
                assert events[i + 1].type in first, (
                    sid,
                    [x.type for x in events],
                )


def test_a_bad_executor_is_one_line_and_exit_2_before_anything_is_recorded(tmp_path: Path) -> None:
    import subprocess
    import sys

    items = tmp_path / "items.txt"
    items.write_text("a\nb\n")
    env = {**os.environ, "FLEET_API_KEY": "sk-x", "FLEET_BASE_URL": "http://127.0.0.1:9/v1"}
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    for executor, says in (
        ("ray:nowhere", "--executor: executor must be local, ray:auto or ray://HOST:PORT"),
        ("ray://127.0.0.2:9", "the Ray executor needs the session log in PostgreSQL"),
    ):
        args = ["deploy", "--task", "t", "--input", str(items), "--store", store, "--executor", executor]
        proc = subprocess.run(
            [sys.executable, "-m", "agent_fleet.cli", *args], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], proc.stderr
