"""The two runs of the dedup claim, through the real CLI: identity decides, never a word of the task.

* ``Research these 1000 URLs`` over 1,000 distinct URLs (a few of them listed twice): one note per URL
  stays one result per URL, the repeats merge with their URL's note.
* 161 planted findings (100 distinct, 40 reported again in other words at other places) from a CLI
  agent over a codebase: they merge to their distinct findings, each keeping its most confident
  member's words, and every place and wording is kept. The lexical embedder keeps the test fast; the
  same run with all-MiniLM-L6-v2 is ``python benchmarks/aggregate.py planted``.

Each run is made twice, the task worded with "each" and without: the outcome must be the same.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.testing import cli_standins as standins
from agent_fleet.testing.planted import planted_findings

from .conftest import Cli


def _results(summary: dict[str, Any]) -> list[dict[str, Any]]:
    lines = (Path(summary["out_dir"]) / "results.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines]


def test_a_note_per_url_stays_one_result_per_url_whatever_the_task_says(cli: Cli) -> None:
    urls = [f"https://site{i % 53}.example.com/docs/topic-{i % 17}/page-{i}" for i in range(1000)]
    repeats = urls[::100]  # ten URLs listed twice: true repeats of one item
    (cli.cwd / "urls.txt").write_text("\n".join(urls + repeats) + "\n")
    outcomes = []
    for task in ("Research these 1000 URLs", "Research each of these 1000 URLs"):
        code, summary = cli.json("deploy", "--agents", "100", "--task", task, "--input", "urls.txt")
        assert code == 0, summary
        assert summary["results_raw"] == 1010 and summary["results_unique"] == 1000
        assert summary["dedup_scope"]["scope"] == "auto" and summary["dedup_scope"]["reason"] == "default"
        assert summary["dedup"]["embedded"] == 0  # no note had another about its URL but its repeat's twin
        results = _results(summary)
        assert sorted(r["location"] for r in results) == sorted(urls)
        twice = [r for r in results if r["duplicates"]]
        assert sorted(r["location"] for r in twice) == sorted(repeats)
        assert all(r["occurrences"][0]["location"] == r["location"] for r in twice)
        outcomes.append((summary["dedup_scope"], sorted((r["location"], r["title"]) for r in results)))
    assert outcomes[0] == outcomes[1]  # a word of the task changes nothing


@pytest.mark.skipif(sys.platform != "linux", reason="CLI agents run in a Linux sandbox")
def test_planted_families_merge_to_their_distinct_findings_with_each_and_without(cli: Cli) -> None:
    planted = planted_findings()
    repo = cli.cwd / "repo"
    for f in planted:
        (repo / f.path).parent.mkdir(parents=True, exist_ok=True)
        (repo / f.path).write_text("def f():\n    pass\n" * 20)
    os.chmod(cli.cwd, 0o755)
    config = cli.cwd / "fleet.yaml"
    config.write_text(f"hands: {{sandbox_root: {cli.cwd / 'sandboxes'}}}\n")
    cmd = f"{sys.executable} {Path(standins.__file__).with_name('planted_agent.py')} {{partition}}"
    best = {}
    for f in planted:
        if f.family is not None and (f.finding not in best or f.confidence > best[f.finding].confidence):
            best[f.finding] = f
    outcomes = []
    for task in ("Find bugs and report each finding once", "Find bugs and report findings once"):
        code, summary = cli.json(
            "deploy", "--agents", "10", "--task", task, "--input", "repo", "--config", str(config),
            "--agent-cmd", cmd, "--agent-format", "jsonl", "--embedder", "lexical",
        )  # fmt: skip
        assert code == 0, summary
        assert summary["results_raw"] == 161
        assert 90 <= summary["results_unique"] <= 115, summary["dedup"]
        results = _results(summary)
        by_text = {(r["title"], r["body"]): r for r in results}
        for f in best.values():  # each family: its most confident member's words stand for it
            rep = by_text[(f.title, f.body)]
            assert rep["confidence"] == f.confidence and rep["duplicates"]
            sessions = {rep["session_id"], *(o["session_id"] for o in rep["occurrences"])}
            assert rep["corroborated_by"] == len(sessions)
            worded = {(o["title"], o["body"]) for o in rep["occurrences"] if "body" in o}
            others = {(g.title, g.body) for g in planted if g.finding == f.finding and g is not f}
            assert worded <= others and {o["location"] for o in rep["occurrences"]} == {
                f"{g.path}:{g.line}" for g in planted if g.finding == f.finding and g is not f
            }
        assert any(r["corroborated_by"] > 1 for r in results)  # copies in other directories: other sessions
        report = (Path(summary["out_dir"]) / "report.md").read_text()
        assert "In other words" in report and "| Dedup rule | identity (default)" in report
        outcomes.append((summary["results_unique"], sorted(by_text)))
    assert outcomes[0] == outcomes[1]  # a word of the task changes nothing
