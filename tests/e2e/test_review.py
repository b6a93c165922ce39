"""Supervision in a live run: one session of a seeded run loops its tool calls; a shape alarm fires,
the review queue shows it, and a decision on it is an event of the run."""

from __future__ import annotations

import json
from pathlib import Path

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store

from .conftest import Cli

LOOPS = 20


def _codebase(root: Path, files: int, *, loops: int = LOOPS) -> Path:
    src = root / "repo"
    src.mkdir()
    for n in range(files):
        body = f"def f{n}(x):\n    return x + {n}\n"
        if n == 3:
            body += f"# fleet-sim: loop {loops}\n"  # the simulated agent re-reads this file, one call a turn
        (src / f"mod{n:02d}.py").write_text(body)
    return src


async def test_a_looping_session_raises_a_shape_alarm_that_a_human_decides(tmp_path: Path, cli: Cli) -> None:
    config = tmp_path / "fleet.yaml"
    # guards far away, so the decision shape (not a guard) is what catches the loop
    config.write_text(
        "guards: {repeated_tool_calls: 100, no_progress_turns: 100}\n"
        "verification: {fraction: 0, minimum: 0}\n"
        "supervision: {shape: {z_threshold: 3.5}}\n"
    )
    src = _codebase(tmp_path, 8)
    args = ("--task", "Review this code", "--input", str(src), "--agents", "8", "--config", str(config))
    code, summary = cli.json("deploy", *args, "--embedder", "lexical")
    assert code == 0, summary
    run_id = summary["run_id"]
    assert summary["review"]["open_by_kind"] == {"shape": 1}, summary["review"]

    async with open_store(cli.store) as log:
        sessions = await log.list_sessions(run_id)
        calls = await log.events_of_run(run_id, [EventType.TOOL_CALL])
        looping = next(s.session_id for s in sessions if "mod03.py" in json.dumps(s.info["partition"]["items"]))
        alarms = [e.data for e in await log.get_events(run_id) if e.type == EventType.ALARM]
    loop_reads = [e for e in calls if e.session_id == looping and "mod03.py" in e.data["arguments"]]
    assert len(sessions) == 8 and len(loop_reads) == LOOPS
    assert [(a["kind"], a["session_id"]) for a in alarms] == [("shape.outlier", looping)]
    assert alarms[0]["top_repeat"]["times"] == LOOPS

    proc = cli.run("review", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    assert [(i["kind"], i["session_id"], i["status"]) for i in listing["items"]] == [("shape", looping, "open")]
    item = listing["items"][0]["id"]
    assert item == f"shape.outlier:{looping}"
    report = (Path(summary["out_dir"]) / "report.md").read_text()
    assert "## Decisions" in report and f"`{item}` | open" in report

    proc = cli.run("review", "approve", item, "--note", "a deliberately slow file", "--json")
    assert proc.returncode == 0, proc.stderr
    decided = json.loads(proc.stdout)
    assert decided["event"]["type"] == "review_decision" and decided["event"]["session_id"] == run_id
    async with open_store(cli.store) as log:
        last = (await log.get_events(run_id))[-1]
    assert last.type == EventType.REVIEW_DECISION
    assert last.data == {
        "item": item,
        "kind": "shape",
        "subject": looping,
        "decision": "approve",
        "previous": "open",
        "note": "a deliberately slow file",
    }
    proc = cli.run("review", run_id, "--json")
    assert json.loads(proc.stdout)["items"] == []  # nothing open any more
    proc = cli.run("review", run_id, "--all", "--json")
    (shown,) = json.loads(proc.stdout)["items"]
    assert (shown["status"], shown["note"]) == ("approved", "a deliberately slow file")

    # bad input: one line, exit 2, nothing appended
    proc = cli.run("review", "reject", f"shape.outlier:{run_id}.s09999")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no review item" in proc.stderr
    proc = cli.run("review", "approve")
    assert proc.returncode == 2 and "needs an item id" in proc.stderr


async def test_the_pause_policy_pauses_a_looping_session_until_its_budget_is_raised(tmp_path: Path, cli: Cli) -> None:
    loops = 80
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "guards: {repeated_tool_calls: 100, no_progress_turns: 100, max_turns: 200}\n"
        "verification: {fraction: 0, minimum: 0}\n"
        "supervision: {shape: {pause: true}}\n"
    )
    src = _codebase(tmp_path, 8, loops=loops)
    args = ("--task", "Review this code", "--input", str(src), "--agents", "8", "--config", str(config))
    code, summary = cli.json("deploy", *args, "--embedder", "lexical")
    assert code == 3, summary  # stopped with a session paused (resumable)
    run_id = summary["run_id"]
    assert summary["sessions"]["paused"] == 1 and summary["sessions"]["completed"] == 7
    async with open_store(cli.store) as log:
        (alarm,) = [e.data for e in await log.get_events(run_id) if e.type == EventType.ALARM]
        looping = alarm["session_id"]
        paused = [e.data for e in await log.get_events(looping) if e.type == EventType.SESSION_PAUSED]
        reads = len(await log.events_of_run(run_id, [EventType.TOOL_CALL]))
    assert alarm["kind"] == "shape.outlier" and alarm["paused"] is True
    assert [p["reason"] for p in paused] == ["budget"]
    assert reads < 7 * 2 + loops  # it was stopped before its loop ended
    listing = json.loads(cli.run("review", run_id, "--json").stdout)
    assert sorted((i["kind"], i["session_id"]) for i in listing["items"]) == [
        ("paused", looping),
        ("shape", looping),
    ]

    proc = cli.run("budget", "raise", looping, "--tokens", "10000000")
    assert proc.returncode == 0, proc.stderr
    code, again = cli.json("resume", run_id)
    assert code == 0, again
    async with open_store(cli.store) as log:
        ran = [e for e in await log.get_events(looping) if e.type == EventType.TOOL_CALL]
        alarms = [e for e in await log.get_events(run_id) if e.type == EventType.ALARM]
    assert sum("mod03.py" in e.data["arguments"] for e in ran) == loops and len(alarms) == 1
    listing = json.loads(cli.run("review", run_id, "--all", "--json").stdout)
    statuses = {i["kind"]: i["status"] for i in listing["items"]}
    assert statuses == {"paused": "resolved", "shape": "open"}
