"""A goal written as the task, with no input: one orchestrator call through the gateway plans it.

The planning call is metered and counted in the run's figures, recorded with the plan (the ``plan``
event is written once), bounded by ``--agents``; a one-line question is not planned. A ``kill -9``
right after planning resumes from the recorded plan: the provider never answers a second plan.
"""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store

from .conftest import Cli

pytestmark = pytest.mark.slow

GOAL = (
    "Write a buyer's guide to electric bikes. Cover commuter bikes for city streets. "
    "Cover cargo bikes for families. Cover folding bikes for trains. Cover mountain bikes for trails."
)
PARTS = ["Cover commuter bikes for city streets.", "Cover cargo bikes for families.",
         "Cover folding bikes for trains.", "Cover mountain bikes for trails."]  # fmt: skip


def _stats(cli: Cli) -> dict[str, Any]:
    with urllib.request.urlopen(cli.base_url.removesuffix("/v1") + "/sim/stats", timeout=5) as resp:
        return dict(json.loads(resp.read()))


async def _plan_events(cli: Cli, run_id: str, store: str | None = None) -> list[dict[str, Any]]:
    async with open_store(store or cli.store) as log:
        return [e.data for e in await log.get_events(run_id) if e.type == EventType.PLAN]


async def test_a_goal_is_planned_by_one_metered_call_into_sub_tasks(cli: Cli) -> None:
    before = _stats(cli)
    code, summary = cli.json("deploy", "--task", GOAL, "--agents", "6", "--embedder", "lexical")
    after = _stats(cli)
    assert code == 0 and summary["status"] == "completed", summary
    assert summary["planner"]["subtasks"] == PARTS
    assert summary["partitions"] == 4 and summary["sessions"]["completed"] == 4
    assert summary["results_raw"] == 4  # one per sub-task: each in exactly one session
    assert after["plans"] - before["plans"] == 1
    # the planning call is in the run's figures: tokens and calls equal the provider's bill
    billed = (after["tokens_in"] - before["tokens_in"]) + (after["tokens_out"] - before["tokens_out"])
    assert summary["tokens"]["total"] == billed
    assert summary["llm_calls"] == after["requests_total"] - before["requests_total"] - 1  # less the probe
    (plan,) = await _plan_events(cli, summary["run_id"])
    assert plan["planner"]["calls"] == 1 and plan["planner"]["usage"]["input_tokens"] > 0
    items = [p["items"] for p in plan["plan"]["partitions"]]
    assert items == [[part] for part in PARTS]


async def test_sub_tasks_are_bounded_by_agents_and_a_question_is_not_planned(cli: Cli) -> None:
    before = _stats(cli)
    code, summary = cli.json("deploy", "--task", GOAL, "--agents", "3", "--embedder", "lexical")
    assert code == 0 and summary["partitions"] == 3, summary
    assert summary["planner"]["subtasks"] == PARTS[:3]  # asked for at most --agents sub-tasks
    code, dry = cli.json("deploy", "--task", GOAL, "--agents", "6", "--dry-run")
    assert code == 0 and [sc["items"] for sc in dry["plan"]["scopes"]] == [[part] for part in PARTS]
    assert any("deploy plans again" in n for n in dry["plan"]["notes"]), dry["plan"]["notes"]
    code, asked = cli.json("deploy", "--task", "What is the capital of France?", "--agents", "6", "--dry-run")
    assert code == 0 and asked["plan"]["partitions"] == 1
    assert any("one session works on the task" in n for n in asked["plan"]["notes"]), asked["plan"]["notes"]
    code, one = cli.json("deploy", "--task", "What is the capital of France?", "--agents", "6")
    assert code == 0 and one["partitions"] == 1 and "planner" not in one
    assert _stats(cli)["plans"] - before["plans"] == 2  # the goal's, and the dry run's
    _, runs = cli.json("status")
    assert len(runs["runs"]) == 2  # the dry run recorded nothing


async def test_kill_9_right_after_planning_resumes_without_a_second_planning_call(cli: Cli, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'crash.db'}"
    before = _stats(cli)["plans"]
    proc = cli.popen("deploy", "--task", GOAL, "--agents", "6", "--embedder", "lexical", FLEET_STORE=store)
    assert proc.stderr is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
    assert line.startswith("agent-fleet: run ") and line.rstrip().endswith(" started"), line
    proc.send_signal(signal.SIGKILL)  # the plan is recorded; no session may have finished
    proc.communicate()
    run_id = line.split()[2]
    code, summary = cli.json("resume", run_id, FLEET_STORE=store)
    assert code == 0 and summary["status"] == "completed", summary
    assert summary["partitions"] == 4 and summary["results_raw"] == 4
    assert _stats(cli)["plans"] - before == 1  # planned once, before the crash
    assert len(await _plan_events(cli, run_id, store)) == 1
    assert summary["planner"]["calls"] == 1
