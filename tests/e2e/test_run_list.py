"""A whole run over a list input, through the CLI, checked against what the session log holds."""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
from collections import Counter
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.plan import Plan
from agent_fleet.domain.usage import Usage
from agent_fleet.session import open_store

from .conftest import API_KEY, Cli, write_lines


async def test_100_agents_over_1000_lines(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 1000)
    code, summary = cli.json(
        "deploy", "--task", "Summarise each page", "--input", str(src), "--agents", "100", "--embedder", "lexical"
    )
    assert code == 0, summary
    assert summary["status"] == "completed"
    assert summary["partitions"] == 100
    assert summary["sessions"] == {"completed": 100, "failed": 0, "paused": 0, "other": 0}

    async with open_store(cli.store) as log:
        run_events = await log.get_events(summary["run_id"])
        plan = Plan.from_dict(next(e for e in run_events if e.type == EventType.PLAN).data["plan"])
        events = await log.events_of_run(summary["run_id"])
    # every line in exactly one partition
    placed = Counter(i for p in plan.partitions for i in p.item_ids)
    assert sorted(placed) == list(range(1000)) and set(placed.values()) == {1}
    lines = src.read_text().split()
    assert sorted(item for p in plan.partitions for item in p.items) == sorted(lines)
    # summary figures equal what the log holds
    responses = [ChatResponse.from_dict(e.data["response"]) for e in events if e.type == EventType.MODEL_RESPONSE]
    # the verifier's calls are recorded in the run's own stream
    verification = next(e.data for e in run_events if e.type == EventType.VERIFICATION)
    v_usage = Usage.from_dict(verification["usage"])
    assert summary["verification"]["sampled"] == max(5, math.ceil(0.05 * summary["results_unique"]))
    assert summary["llm_calls"] == len(responses) + verification["calls"]
    assert summary["tokens"]["input"] == sum(r.usage.input_tokens for r in responses) + v_usage.input_tokens
    assert summary["tokens"]["output"] == sum(r.usage.output_tokens for r in responses) + v_usage.output_tokens
    assert summary["tokens"]["total"] == summary["tokens"]["input"] + summary["tokens"]["output"]
    spent = sum((r.cost_usd for r in responses), start=Decimal(verification["cost_usd"]))
    assert Decimal(summary["cost_usd_exact"]) == spent
    raw = [e for e in events if e.type == EventType.RESULT_ITEM]
    assert summary["results_raw"] == len(raw) == 1000  # one note per line
    # results.jsonl: the unique results, each naming its duplicates, covering every raw result once
    out = Path(summary["out_dir"])
    unique = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(unique) == summary["results_unique"]
    covered = [u["id"] for u in unique] + [d for u in unique for d in u["duplicates"]]
    assert sorted(covered) == sorted(e.data["id"] for e in raw)
    for name in ("summary.json", "report.md", "report.html"):
        assert (out / name).stat().st_size > 0
    # the key never leaves the gateway
    blob = json.dumps([e.to_dict() for e in events + run_events]) + (out / "summary.json").read_text()
    assert API_KEY not in blob


def test_status_and_events_read_the_log(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 30)
    code, summary = cli.json(
        "deploy", "--task", "Summarise", "--input", str(src), "--agents", "3", "--embedder", "lexical"
    )
    assert code == 0
    code, runs = cli.json("status")
    assert code == 0 and runs["runs"][0]["run_id"] == summary["run_id"]
    assert runs["runs"][0]["status"] == "completed"
    code, one = cli.json("status", summary["run_id"])
    assert one["sessions"] == {"completed": 3}
    assert one["tokens"]["total"] == summary["tokens"]["total"]
    sid = f"{summary['run_id']}.s00001"
    code, evs = cli.json("events", sid, "--after", "2")
    assert code == 0
    seqs = [e["seq"] for e in evs["events"]]
    assert seqs[0] == 3 and seqs == list(range(3, 3 + len(seqs)))
    assert evs["events"][-1]["type"] == "session_completed"


@pytest.mark.postgres
def test_a_run_on_postgresql_then_status_reads_it(cli: Cli, tmp_path: Path) -> None:
    schema = f"e2e_{os.getpid()}_{secrets.token_hex(3)}"
    store = f"postgresql://postgres@127.0.0.1:5432/test?schema={schema}"
    src = write_lines(tmp_path / "urls.txt", 40)
    try:
        code, summary = cli.json(
            "deploy",
            "--task",
            "Summarise",
            "--input",
            str(src),
            "--agents",
            "8",
            "--embedder",
            "lexical",
            FLEET_STORE=store,
        )
        assert code == 0 and summary["sessions"]["completed"] == 8 and summary["results_raw"] == 40
        code, one = cli.json("status", summary["run_id"], FLEET_STORE=store)
        assert one["status"] == "completed" and one["tokens"]["total"] == summary["tokens"]["total"]
    finally:
        asyncio.run(_drop(schema))


async def _drop(schema: str) -> None:
    conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test")
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()
