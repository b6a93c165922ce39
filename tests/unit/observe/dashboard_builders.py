"""Runs written into a session log the way the engine writes them, for the dashboard's tests."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.observe.metrics import FleetSnapshot, ModelFigures, metrics_key, render
from agent_fleet.session.port import SessionLog


async def create_run(
    log: SessionLog,
    run_id: str,
    sessions: int,
    *,
    options: dict[str, Any] | None = None,
    forecast: dict[str, Any] | None = None,
) -> list[str]:
    opts = {"task": "Summarise", "agents": sessions, "model": "m1", **(options or {})}
    created = {"task": "Summarise", "input": None, "options": opts, "forecast": forecast}
    await log.emit_events(run_id, [(EventType.RUN_CREATED, created), (EventType.PLAN, {"plan": {}})])
    sids = [f"{run_id}.s{i:05d}" for i in range(sessions)]
    for i, sid in enumerate(sids):
        await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": run_id, "index": i, "model": "m1"})
    return sids


async def answer(log: SessionLog, sid: str, *, tokens: tuple[int, int], usd: str, retried: int = 0) -> None:
    """One turn: request, response with this usage and cost."""
    resp = ChatResponse(
        content="ok",
        usage=Usage(tokens[0], tokens[1]),
        model="m1",
        cost_usd=Decimal(usd),
        retried=("rate_limited",) * retried,
    )
    await log.emit_events(
        sid,
        [
            (EventType.MODEL_REQUEST, {"turn": 1, "model": "m1"}),
            (EventType.MODEL_RESPONSE, {"response": resp.to_dict()}),
        ],
    )


async def store_metrics(
    log: SessionLog,
    run_id: str,
    *,
    limit: int,
    in_flight: int = 0,
    admission: bytes = b"",
    raw: int = 0,
    unique: int = 0,
    gateway: str = "",
) -> None:
    """The ``metrics:RUN`` snapshot a live run's ticker stores (``gateway``: the engine's gateway it names)."""
    snap = FleetSnapshot(
        run_id=run_id,
        models={"m1": ModelFigures(input_tokens=10, output_tokens=5, calls=1)},
        concurrency_limit=limit,
        in_flight=in_flight,
        sessions={"active": 1},
        dedup_ratio=(1 - unique / raw) if raw else None,
        results_raw=raw,
        results_unique=unique,
    )
    stored = {"text": render(snap, admission=admission).decode(), "gateway_source": gateway}
    await log.put_snapshot(metrics_key(run_id), stored)
