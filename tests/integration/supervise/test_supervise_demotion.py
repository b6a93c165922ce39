"""Quality feeds the router: a model whose answers were truncated in a recent run is demoted for the
sessions of the next run, and the demotion is an event of that run."""

from __future__ import annotations

import time
from pathlib import Path

from agent_fleet.config import ModelConfig, load_config
from agent_fleet.domain.events import EventType
from agent_fleet.engine import Engine, plan_run
from agent_fleet.options import RunOptions
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.router import Router
from agent_fleet.supervise import store_model_signals
from agent_fleet.testing import FakeProvider, MemorySessionLog

MODELS = [
    ModelConfig(name="fast", model="m-fast", tier="simple"),
    ModelConfig(name="mid", model="m-mid", tier="medium"),
]


async def _earlier_run(log: MemorySessionLog, truncated: int, calls: int) -> None:
    """A finished run of ``calls`` answers by m-fast, ``truncated`` of them cut at the output limit."""
    await log.emit_event("run-old", EventType.RUN_CREATED, {"task": "t", "options": {}})
    sid = "run-old.s00000"
    await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": "run-old", "index": 0, "model": "m-fast"})
    for n in range(calls):
        reason = "length" if n < truncated else "stop"
        await log.emit_event(sid, EventType.MODEL_RESPONSE, {"turn": n + 1, "response": {"finish_reason": reason}})
    # what the engine stores as the run ends
    await store_model_signals(log, "run-old", await log.events_of_run("run-old"), [], now=time.time())


async def _routes(tmp_path: Path, truncated: int) -> tuple[list[str], list[dict[str, object]]]:
    items = tmp_path / "items.txt"
    items.write_text("".join(f"item {n}\n" for n in range(6)))
    config = tmp_path / "fleet.yaml"
    config.write_text("supervision: {quality: {min_calls: 10, max_truncated_rate: 0.2}}\n")
    options = RunOptions(task="Summarise", input_path=str(items), agents=3, config_path=str(config))
    log = MemorySessionLog()
    await log.open()
    await _earlier_run(log, truncated=truncated, calls=10)
    engine = Engine(log=log, gateway=Gateway(FakeProvider(), router=Router(MODELS)), config=load_config(config))
    try:
        run_id = await engine.create_run(plan_run(options), options, run_id="run-new")
        routes = [e.data["name"] for e in await log.events_of_run(run_id, [EventType.ROUTE])]
        demoted = [e.data for e in await log.get_events(run_id) if e.type == EventType.MODEL_DEMOTED]
    finally:
        await engine.shutdown()
    return routes, demoted


async def test_a_truncating_model_is_demoted_for_new_sessions(tmp_path: Path) -> None:
    routes, demoted = await _routes(tmp_path, truncated=3)
    assert routes == ["mid", "mid", "mid"]  # an easy task would have gone to fast
    assert len(demoted) == 1 and demoted[0]["model"] == "m-fast"
    assert demoted[0]["reasons"] == ["truncated answers 30% > 20%"]
    assert demoted[0]["signals"]["truncated"] == 3 and demoted[0]["signals"]["calls"] == 10


async def test_under_the_threshold_nothing_is_demoted(tmp_path: Path) -> None:
    routes, demoted = await _routes(tmp_path, truncated=2)
    assert routes == ["fast", "fast", "fast"] and demoted == []
