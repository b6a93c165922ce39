"""What the API returns about a run, read from the store (and from the host for live runs)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from agent_fleet.control.host import FleetHost
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import EventType, SessionRecord, SessionState
from agent_fleet.domain.payloads import ResultRecorded
from agent_fleet.engine import read_run_figures, snapshot_key
from agent_fleet.errors import SessionNotFound
from agent_fleet.options import RunOptions

__all__ = ["run_detail", "run_results", "run_row"]


def _status(host: FleetHost, rec: SessionRecord, live: bool) -> str:
    if live:
        return "running"
    if rec.session_id in host.failures:
        return "failed"
    if rec.state in (SessionState.RUNNING, SessionState.CREATED):
        return "interrupted"  # no task of this server drives it: resume continues it
    return str(rec.state)


def run_row(host: FleetHost, rec: SessionRecord, options: RunOptions, *, live: bool) -> dict[str, Any]:
    """``live``: a task of the host drove the run when ``rec`` was read (asked before reading it, so a
    run that ends in between reads as running, never as interrupted)."""
    return {
        "run_id": rec.session_id,
        "status": _status(host, rec, live),
        "team": options.team,
        "task": options.task,
        "input": options.input_path,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
    }


async def run_detail(host: FleetHost, run_id: str, options: RunOptions) -> dict[str, Any]:
    """``status RUN_ID``'s figures; the summary once the run has ended."""
    log = host.engine.log
    live = host.active(run_id)
    rec = await log.get_session(run_id)
    if rec is None:
        raise SessionNotFound(f"no run {run_id!r}")
    out = {**run_row(host, rec, options, live=live), **await read_run_figures(log, run_id)}
    if run_id in host.failures:
        out["error"] = host.failures[run_id]
    dedup = await log.get_snapshot(snapshot_key(run_id))
    if dedup is not None:
        keys = ("raw", "unique", "dedup_rate", "final", "embedder", "embedded", "cache_hits")
        out["dedup"] = {k: dedup.get(k) for k in keys}
    summary = await _summary(host, run_id, options)
    if summary is not None and not live:
        out["summary"] = summary
    return out


async def _summary(host: FleetHost, run_id: str, options: RunOptions) -> dict[str, Any] | None:
    report = host.reports.get(run_id)
    if report is not None:
        return report.summary
    if options.out_dir is None:
        return None
    data = await asyncio.to_thread(_read_json, Path(options.out_dir) / "summary.json")
    return data if isinstance(data, dict) else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


async def run_results(host: FleetHost, run_id: str, options: RunOptions, offset: int, limit: int) -> dict[str, Any]:
    """The unique results once the run ended here or left a results file; else the raw ones so far."""
    report = host.reports.get(run_id)
    items: list[dict[str, Any]] | None = None
    if report is not None and not host.active(run_id):
        items = [r.to_dict() for r in report.results]
    elif options.out_dir is not None and not host.active(run_id):
        items = await asyncio.to_thread(_read_jsonl, Path(options.out_dir) / "results.jsonl")
    final = items is not None
    if items is None:
        found = [
            decode_as(e, ResultRecorded) for e in await host.engine.log.events_of_run(run_id, [EventType.RESULT_ITEM])
        ]
        items = [dict(r.record) for r in found if r is not None]
    return {
        "run_id": run_id,
        "final": final,
        "total": len(items),
        "offset": offset,
        "results": items[offset : offset + limit],
    }


def _read_jsonl(path: Path) -> list[dict[str, Any]] | None:
    if not os.path.exists(path):
        return None
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out
