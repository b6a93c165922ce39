"""``serve`` resumes only what it started: on start it takes up the runs a server recorded and left
running (its process gone), and leaves a command line's runs — crashed or not — and ended runs alone.

The store is written as the engine writes it: one run recorded by a server and one by ``deploy``, both
left running by a process that is gone, and one server run that completed. The host resumes the first
(it completes), and nothing else gets a ``run_resumed``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from agent_fleet.config import FleetConfig
from agent_fleet.control import FleetHost
from agent_fleet.control.host import SERVE
from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions, plan_run
from agent_fleet.engine.records import create_sessions
from agent_fleet.session import open_store
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.provider import SimConfig

from .conftest import write_lines


def _gone_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


async def _record(store: str, run_id: str, options: RunOptions, *, via: str | None, ended: bool = False) -> None:
    plan = plan_run(options)
    created = {
        "task": options.task,
        "input": options.input_path,
        "options": options.to_dict(),
        "owner": {"pid": _gone_pid(), "host": socket.gethostname()},
        **({"via": via} if via else {}),
    }
    async with open_store(store) as log:
        await log.emit_events(run_id, [(EventType.RUN_CREATED, created), (EventType.PLAN, {"plan": plan.to_dict()})])
        await create_sessions(log, None, run_id, plan, options, FleetConfig())
        if ended:
            await log.emit_event(run_id, EventType.RUN_COMPLETED, {"summary": {"status": "completed"}})


async def test_serve_resumes_its_own_runs_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    items = write_lines(tmp_path / "urls.txt", 4)
    base = RunOptions(task="Summarise each page", input_path=str(items), agents=2, embedder="lexical")
    await _record(store, "run-000000000001aaaaaa", replace(base, out_dir=str(tmp_path / "out-1")), via=SERVE)
    await _record(store, "run-000000000002bbbbbb", replace(base, out_dir=str(tmp_path / "out-2")), via=None)
    await _record(store, "run-000000000003cccccc", base, via=SERVE, ended=True)
    async with SimProvider(SimConfig(latency=0.01, seed=3)) as sim:
        env = {"FLEET_BASE_URL": sim.base_url, "FLEET_API_KEY": "sk-test"}
        async with FleetHost.open(store_url=store, env=env, workdir=str(tmp_path)) as host:
            assert await host.recover() == ["run-000000000001aaaaaa"]
            await host.wait("run-000000000001aaaaaa")
            assert host.reports["run-000000000001aaaaaa"].status == "completed"
    async with open_store(store) as log:
        resumed = {
            run_id: [e.type for e in await log.get_events(run_id)].count(EventType.RUN_RESUMED)
            for run_id in ("run-000000000001aaaaaa", "run-000000000002bbbbbb", "run-000000000003cccccc")
        }
    assert resumed == {"run-000000000001aaaaaa": 1, "run-000000000002bbbbbb": 0, "run-000000000003cccccc": 0}
