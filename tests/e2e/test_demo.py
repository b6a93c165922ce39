"""`agent-fleet demo`: offline, end to end, prints where its report is."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import Cli


def test_demo_runs_offline_and_reports(cli: Cli) -> None:
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
