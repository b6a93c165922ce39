"""Resume of an ended run changes nothing; ``--retry-failed`` runs what failed for good again.

A run whose every call stalls past the session timeout fails for good (3 attempts per session).
``resume`` then leaves it as it is and prints its summary; ``resume --retry-failed`` against a
provider that answers runs those sessions again from their logs and completes the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_fleet.sim.provider import SimConfig, sim_provider_process

from .conftest import Cli, write_lines

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _outputs(out_dir: Path) -> dict[str, bytes]:
    return {name: (out_dir / name).read_bytes() for name in ("summary.json", "results.jsonl", "metrics.prom")}


def test_resume_of_an_ended_run_and_retry_failed(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 6)
    args = ("--task", "Summarise", "--input", str(src), "--agents", "3", "--embedder", "lexical", "--timeout", "3")
    with sim_provider_process(SimConfig(rate_stall=1.0, stall_seconds=60.0)) as stalling:
        code, failed = cli.json("deploy", *args, FLEET_BASE_URL=stalling)
    assert code == 1 and failed["status"] == "failed" and failed["sessions"]["failed"] == 3, failed
    run_id, out_dir = failed["run_id"], Path(failed["out_dir"])
    before = _outputs(out_dir)
    events_before = cli.json("events", run_id)[1]["events"]

    # plain resume: nothing runs, nothing changes, the summary is printed with its exit code
    again = cli.run("resume", run_id, "--json")
    assert again.returncode == 1, again.stderr
    assert json.loads(again.stdout) == failed
    assert again.stderr.strip().splitlines() == [
        f"agent-fleet: run {run_id} has already ended (failed); nothing was run",
        f"agent-fleet: run {run_id}: 3 of 3 session(s) failed for good (model-call errors: timeout 9)",
    ]
    assert _outputs(out_dir) == before
    assert cli.json("events", run_id)[1]["events"] == events_before

    # --retry-failed: the failed sessions run again against a provider that answers
    code, retried = cli.json("resume", run_id, "--retry-failed")
    assert code == 0, retried
    assert retried["status"] == "completed" and retried["sessions"]["completed"] == 3
    assert retried["results_raw"] == 6
    done = _outputs(out_dir)

    # and a completed run is left as it is
    last = cli.run("resume", run_id, "--json")
    assert last.returncode == 0 and json.loads(last.stdout) == retried
    assert "has already ended (completed)" in last.stderr
    assert _outputs(out_dir) == done
