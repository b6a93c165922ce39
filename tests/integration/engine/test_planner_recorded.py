"""The planner's call is recorded like any call: a goal's run is recorded before its planner is asked,
so a planner's call that times out leaves a run (listed, resumable), its charge and its error in the
run's stream, and an error that says it was the planner's; ``resume`` plans the run again and ends it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions, deploy, resume
from agent_fleet.errors import ProviderTimeout
from agent_fleet.session.store import open_store
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.settings import SimConfig

GOAL = (
    "Write a buyer's guide to electric bikes. Cover commuter bikes for city streets. "
    "Cover cargo bikes for families. Cover folding bikes for trains."
)


async def test_a_planner_call_that_times_out_leaves_a_resumable_run_that_says_so(tmp_path: Path) -> None:
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text("provider: {timeout_s: 1}\nverification: {fraction: 0, minimum: 0}\n")
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    async with SimProvider(SimConfig(rate_stall=1.0, stall_seconds=3.0, stall_drop=0.0)) as sim:
        options = RunOptions(
            task=GOAL,
            agents=3,
            provider=sim.base_url,
            config_path=str(cfg),
            out_dir=str(tmp_path / "out"),
            embedder="lexical",
        )
        with pytest.raises(ProviderTimeout) as info:
            await deploy(options, store_url=store, api_key="sk-local", run_id="run-planner-timeout")
        message = str(info.value)
        assert "the planner's call of run run-planner-timeout failed" in message and "resume" in message, message

        async with open_store(store) as log:
            (run,) = await log.list_runs()
            events = [(e.type, e.data) for e in await log.get_events(run.session_id)]
        assert run.session_id == "run-planner-timeout"
        assert [t for t, _ in events] == [EventType.RUN_CREATED, EventType.MODEL_RESENT, EventType.MODEL_ERROR]
        resent, failed = events[1][1], events[2][1]
        assert resent["planner"] and resent["cause"] == "timeout" and resent["tokens"] > 0
        assert failed["planner"] and failed["kind"] == "timeout"

        sim.config = SimConfig()  # the server answers again
        report = await resume("run-planner-timeout", store_url=store, api_key="sk-local")
    assert report.status == "completed", report.summary
    assert report.summary["planner"]["calls"] == 1 and len(report.summary["planner"]["subtasks"]) == 3
    assert report.summary["llm_calls_resent"] == 1  # the timed-out planner call, charged at its reservation
    assert report.summary["errors"]["timeout"] == 1
