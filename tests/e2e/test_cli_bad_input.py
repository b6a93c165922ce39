"""Bad input gets one clear line and the documented exit code — never a traceback, never a run left
behind: numbers out of range, an --out that cannot be this run's, a REST body nested too deep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agent_fleet.testing.serve_process import serve_process

from .conftest import Cli, write_lines


def _runs(cli: Cli) -> list[dict[str, str]]:
    code, data = cli.json("status")
    assert code == 0
    return list(data["runs"])


def _bad(ran: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert ran.returncode == code, (ran.returncode, ran.stderr)
    assert "Traceback" not in ran.stderr, ran.stderr
    return ran.stderr


@pytest.mark.parametrize("command", ["serve", "dashboard", "sim-provider"])
@pytest.mark.parametrize("port", ["70000", "-5"])
def test_a_port_out_of_range_is_usage(command: str, port: str, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "agent_fleet.cli", command, "--port", port]
    ran = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "--port" in _bad(ran)


def test_events_after_a_huge_or_malformed_seq(cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 2)
    code, summary = cli.json("deploy", "--task", "Classify each", "--input", str(items), "--agents", "2")
    assert code == 0
    session = f"{summary['run_id']}.s00001"
    beyond = cli.run("events", session, "--after", str(10**23), "--json")
    assert beyond.returncode == 0, beyond.stderr
    assert json.loads(beyond.stdout)["events"] == []
    assert "--after" in _bad(cli.run("events", session, "--after", "1e23"))
    assert "--after" in _bad(cli.run("events", session, "--after", "-1"))


def test_timeout_nan_is_usage_and_records_nothing(cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 2)
    for value in ("nan", "inf", "-3"):
        ran = cli.run("deploy", "--task", "t", "--input", str(items), "--timeout", value)
        assert "--timeout must be a positive number of seconds" in _bad(ran)
    assert _runs(cli) == []


def test_an_out_that_is_a_file_or_cannot_be_made_is_usage_and_records_nothing(cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 2)
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    for out, words in ((a_file, "is a file"), (a_file / "below", "cannot create it")):
        ran = cli.run("deploy", "--task", "t", "--input", str(items), "--out", str(out))
        assert words in _bad(ran)
        assert len(ran.stderr.strip().splitlines()) == 1
    assert a_file.read_text() == "mine\n"
    assert _runs(cli) == []


def test_two_runs_given_one_out_the_second_is_refused(cli: Cli, tmp_path: Path) -> None:
    items = write_lines(tmp_path / "items.txt", 2)
    out = tmp_path / "out"
    args = ("deploy", "--task", "Classify each", "--input", str(items), "--agents", "1", "--out", str(out))
    code, first = cli.json(*args)
    assert code == 0
    before = (out / "summary.json").read_text()
    ran = cli.run(*args)
    assert f"holds the outputs of run {first['run_id']}" in _bad(ran)
    assert (out / "summary.json").read_text() == before
    assert [r["run_id"] for r in _runs(cli)] == [first["run_id"]]
    code, resumed = cli.json("resume", first["run_id"])  # the run itself may come back to its --out
    assert code == 0 and resumed["run_id"] == first["run_id"]


def test_a_rest_body_nested_100000_deep_is_a_400(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text("rate_limit: {baseline_concurrency: 4}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.update(FLEET_BASE_URL=cli.base_url, FLEET_API_KEY="sk-test")
    with serve_process(tmp_path, env, store=cli.store) as served:
        for path in ("/v1/runs", "/v1/runs/run-x/budget"):
            body = b"[" * 100_000 + b"]" * 100_000
            request = urllib.request.Request(served.url + path, data=body, method="POST")
            request.add_header("Content-Type", "application/json")
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request, timeout=30)
            assert caught.value.code in (400, 404), path
            if path == "/v1/runs":
                assert caught.value.code == 400
                error = json.loads(caught.value.read())["error"]
                assert error["type"] == "invalid_request" and "nested" in error["message"]
    assert "Traceback" not in served.stderr
