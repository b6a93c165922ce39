"""What the CLI tells a user, from the real command against the simulated provider: progress when
stderr is not a terminal, whole run ids, the right word for a budget change and for a guard's stop, a
reason on stderr for every non-zero exit."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent_fleet.sim.provider import SimConfig, sim_provider_process

from .conftest import Cli, write_lines

PROGRESS = re.compile(r"^agent-fleet: \d+ s · sessions \d+/4 ended · active \d+", re.MULTILINE)


def test_a_run_whose_stderr_is_not_a_terminal_prints_progress_lines(slow_cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 8)
    args = ("deploy", "--task", "Classify each", "--input", str(items), "--agents", "4", "--max-concurrency", "2")
    ran = slow_cli.run(*args, "--json", FLEET_PROGRESS_EVERY="0.5")
    assert ran.returncode == 0, ran.stderr
    assert len(PROGRESS.findall(ran.stderr)) >= 2, ran.stderr
    json.loads(ran.stdout)  # progress never reaches stdout
    quiet = slow_cli.run(*args, "--json", "--progress", "none", FLEET_PROGRESS_EVERY="0.5")
    assert quiet.returncode == 0 and not PROGRESS.search(quiet.stderr), quiet.stderr


def test_status_prints_whole_run_ids_at_80_columns(cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 2)
    task = "Summarise each page in two sentences, naming its main subject and its intended reader first"
    for _ in range(2):
        assert cli.run("deploy", "--task", task, "--input", str(items), "--agents", "1").returncode == 0
    runs = [r["run_id"] for r in cli.json("status")[1]["runs"]]
    shown = cli.run("status", COLUMNS="80")
    assert shown.returncode == 0 and len(runs) == 2
    for run_id in runs:
        assert run_id in shown.stdout, shown.stdout


def test_a_lower_cap_is_called_lowered_and_a_higher_one_raised(cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 4)
    code, summary = cli.json(
        "deploy", "--task", "Classify each", "--input", str(items), "--agents", "2", "--budget-tokens", "100"
    )
    assert code == 3 and summary["status"] == "paused"
    run = summary["run_id"]
    lowered = cli.run("budget", "raise", run, "--tokens", "50")
    assert lowered.returncode == 0 and "budget lowered (tokens 50)" in lowered.stdout, lowered.stdout
    raised = cli.run("budget", "raise", f"{run}.s00001", "--tokens", "90000")
    assert raised.returncode == 0 and "budget raised (tokens 90000)" in raised.stdout, raised.stdout


def test_a_stop_by_the_repeated_tool_call_guard_is_not_called_a_budget_pause(cli: Cli, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "loop.py").write_text("x = 1\n# fleet-sim: loop 20\n")  # the simulated agent re-reads it, one call a turn
    ran = cli.run("deploy", "--task", "Find bugs", "--input", str(repo), "--agents", "1", "--json")
    assert ran.returncode == 3, ran.stderr
    assert json.loads(ran.stdout)["decisions"]["pauses"] == {"repeated_tool_call": 1}
    last = ran.stderr.strip().splitlines()[-1]
    assert "runaway guard" in last and "the same tool call repeated" in last and "budget" not in last, last


def test_sessions_that_fail_for_good_give_their_reason_on_stderr(tmp_path: Path) -> None:
    with sim_provider_process(SimConfig(reject_unknown_models=True, latency=0.01)) as url:
        cli = Cli(cwd=tmp_path, base_url=url, store=f"sqlite:///{tmp_path / 'fleet.db'}")
        items = write_lines(tmp_path / "items.txt", 2)
        ran = cli.run(
            "deploy", "--task", "Classify each", "--input", str(items), "--agents", "1", "--model", "no-such-model"
        )
    assert ran.returncode == 1, ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert "1 of 1 session(s) failed for good" in last and "model_not_found" in last, last
