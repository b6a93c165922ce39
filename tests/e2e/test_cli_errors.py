"""Bad input gets one readable line and a documented exit code — never a traceback — and loses nothing."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from .conftest import API_KEY, Cli, write_lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert lines, "expected an error message"
    assert "Traceback" not in stderr
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--input", "does/not/exist"], "does/not/exist"),
        (["--agents", "0"], "--agents"),
        (["--budget-tokens", "-5"], "--budget-tokens"),
        (["--budget-usd", "lots"], "--budget-usd"),
        (["--timeout", "0"], "--timeout"),
        (["--provider", "ftp://nowhere"], "--provider"),
        (["--store", "mysql://x"], "store"),
        (["--config", "missing-fleet.yaml"], "missing-fleet.yaml"),
        (["--dedup-threshold", "0"], "--dedup-threshold must be in (0, 1]"),
        (["--dedup-threshold", "1.5"], "--dedup-threshold must be in (0, 1]"),
        (["--dedup-threshold", "nan"], "--dedup-threshold must be in (0, 1]"),
        (["--dedup-threshold", "high"], "--dedup-threshold must be a number"),
        (["--dedup-scope", "each"], "--dedup-scope: unknown scope 'each'"),
    ],
)
def test_bad_usage_exits_2_with_one_line(cli: Cli, tmp_path: Path, args: list[str], needle: str) -> None:
    src = write_lines(tmp_path / "urls.txt", 3)
    full = ["deploy", "--task", "x", "--input", str(src), *args]
    proc = cli.run(*full)
    assert proc.returncode == 2, proc.stderr
    assert needle in _one_line_error(proc.stderr)
    assert proc.stdout == ""


def test_hostile_and_malformed_config_exit_2(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 3)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "e: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("budgets: {session_tokens: -1}\n")
    tag = tmp_path / "tag.yaml"
    tag.write_text("models: !!python/object/apply:os.system ['true']\n")
    for cfg in (bomb, bad, tag):
        proc = cli.run("deploy", "--task", "x", "--input", str(src), "--config", str(cfg))
        assert proc.returncode == 2, (cfg.name, proc.stderr)
        _one_line_error(proc.stderr)


def test_unreadable_input_exit_2(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "records.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    proc = cli.run("deploy", "--task", "x", "--input", str(bad))
    assert proc.returncode == 2
    assert "line 2" in _one_line_error(proc.stderr)


def test_unreachable_provider_exits_4_and_records_no_run(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 3)
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    proc = cli.run("deploy", "--task", "x", "--input", str(src), FLEET_BASE_URL=dead)
    assert proc.returncode == 4, proc.stderr
    line = _one_line_error(proc.stderr)
    assert "unreachable" in line and API_KEY not in line
    _code, runs = cli.json("status")
    assert runs == {"runs": []}


def test_unreachable_store_exits_4(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 3)
    store = f"postgresql://fleet:hunter2@127.0.0.1:{_free_port()}/nothing"
    proc = cli.run("deploy", "--task", "x", "--input", str(src), "--store", store)
    assert proc.returncode == 4, proc.stderr
    line = _one_line_error(proc.stderr)
    assert "hunter2" not in line


def test_unknown_run_and_session_exit_2(cli: Cli) -> None:
    for args in (["resume", "run-nope"], ["status", "run-nope"], ["events", "nope"]):
        proc = cli.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        _one_line_error(proc.stderr)


def test_missing_key_for_a_remote_provider_exits_2(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 3)
    proc = cli.run(
        "deploy", "--task", "x", "--input", str(src), "--provider", "openai", FLEET_API_KEY="", FLEET_BASE_URL=""
    )
    assert proc.returncode == 2, proc.stderr
    assert "FLEET_API_KEY" in _one_line_error(proc.stderr)
