"""`agent-fleet demo`: offline, end to end, prints where its report is; its sessions edit worktrees of a git
copy of the sample, never the copy itself."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from agent_fleet.domain.events import Event, EventType
from agent_fleet.session import open_store

from .conftest import Cli


def test_demo_runs_offline_reports_and_edits(cli: Cli) -> None:
    proc = cli.run("demo", FLEET_BASE_URL="", FLEET_API_KEY="")  # needs no provider and no key
    assert proc.returncode == 0, proc.stderr
    report = next(line.split(": ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("report: "))
    out = Path(report).parent
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["results_raw"] > summary["results_unique"] > 0  # the codebase has copied mistakes
    assert (out / "report.html").read_text().lstrip().lower().startswith("<!doctype html>")
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == summary["results_unique"]

    # a run that makes changes: on a git copy of the sample, which its sessions never touch themselves
    repo = cli.cwd / ".fleet" / "demo-repo"
    assert f"git copy of the sample: {repo}\n" in proc.stderr
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout == ""

    async def events() -> list[Event]:
        async with open_store(cli.store) as log:
            return await log.events_of_run(summary["run_id"])

    # the sessions fixed what has a mechanical fix, each edit made in their own worktree; their changes
    # were captured, merged into the run's branch and listed with their diffs in the report
    edits = [e for e in asyncio.run(events()) if e.type == EventType.TOOL_RESULT and e.data["name"] == "edit_file"]
    assert len(edits) >= 10 and not [e for e in edits if e.data["is_error"]]
    changes = summary["changes"]
    assert changes["sessions_with_changes"] >= 5 and changes["merged"] == changes["sessions_with_changes"]
    assert changes["insertions"] > 0 and changes["out_of_scope"] == 0
    branch = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", changes["branch"]], capture_output=True)
    assert branch.returncode == 0
    assert "```diff" in (out / "report.md").read_text()
