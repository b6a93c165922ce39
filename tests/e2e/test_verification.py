"""Cross-fleet verification in a live run: a verifier that refutes a known share raises the alarm."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, sim_provider_process

from .conftest import Cli, write_lines


@pytest.fixture(scope="module")
def doubtful_url() -> Iterator[str]:
    """A provider whose verifier refutes 40 % of what it is shown (by a hash of the text)."""
    with sim_provider_process(SimConfig(latency=0.01, verifier_refute_pct=40.0, verifier_unsure_pct=0.0)) as url:
        yield url


async def test_low_agreement_raises_the_alarm_and_marks_the_output(tmp_path: Path, doubtful_url: str) -> None:
    cli = Cli(cwd=tmp_path, base_url=doubtful_url, store=f"sqlite:///{tmp_path / 'fleet.db'}")
    config = tmp_path / "fleet.yaml"
    config.write_text("verification: {fraction: 0.5, minimum: 30, threshold: 0.9, seed: 1}\n")
    src = write_lines(tmp_path / "urls.txt", 120)
    code, summary = cli.json(
        "deploy",
        "--task",
        "Summarise",
        "--input",
        str(src),
        "--agents",
        "12",
        "--config",
        str(config),
        "--embedder",
        "lexical",
    )
    assert code == 0, summary
    v = summary["verification"]
    assert v["sampled"] == max(30, (summary["results_unique"] + 1) // 2)
    assert v["judged"] == v["sampled"] and v["confirmed"] + v["refuted"] == v["judged"]
    lo, hi = v["agreement_ci"]
    assert lo <= v["agreement"] <= hi and lo <= 0.6 <= hi  # the interval covers the planted 60 %
    assert v["alarm"] is True and summary["needs_review"] is True
    rows = [json.loads(line) for line in (Path(summary["out_dir"]) / "results.jsonl").read_text().splitlines()]
    statuses = [r["verification"]["status"] for r in rows if "verification" in r]
    assert len(statuses) == v["sampled"] and set(statuses) <= {"confirm", "refute"}
    assert statuses.count("refute") == v["refuted"]
    async with open_store(cli.store) as log:
        run_events = await log.get_events(summary["run_id"])
    alarms = [e.data for e in run_events if e.type == EventType.ALARM]
    assert len(alarms) == 1 and "needs review" in alarms[0]["message"]
    # resuming a finished run reuses the recorded verdicts: no second bill
    code, again = cli.json("resume", summary["run_id"])
    assert again["verification"] == v and again["llm_calls"] == summary["llm_calls"]
