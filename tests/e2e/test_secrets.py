"""The provider key lives only in the gateway: no event, log line, result, report or error holds it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from .conftest import API_KEY, Cli, write_lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_trace_of_the_key_anywhere(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 60)
    out = tmp_path / "out"
    seen: list[str] = []
    proc = cli.run("deploy", "--task", "Summarise", "--input", str(src), "--agents", "6", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    seen += [proc.stdout, proc.stderr]
    run_id = json.loads(proc.stdout)["run_id"]
    for args in (["status"], ["status", run_id], ["events", f"{run_id}.s00000"], ["events", run_id], ["queues"]):
        p = cli.run(*args, "--json")
        seen += [p.stdout, p.stderr]
    # errors: an unreachable provider, a failed resume
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    p = cli.run("deploy", "--task", "x", "--input", str(src), FLEET_BASE_URL=dead)
    seen += [p.stdout, p.stderr]
    p = cli.run("resume", "run-missing")
    seen += [p.stdout, p.stderr]
    for text in seen:
        assert API_KEY not in text
    # every file the run wrote, and the store's bytes (database, write-ahead log)
    files = [f for f in [*out.rglob("*"), *tmp_path.glob("fleet.db*")] if f.is_file()]
    assert any(f.name == "results.jsonl" for f in files) and any(f.name.startswith("fleet.db") for f in files)
    for f in files:
        assert API_KEY.encode() not in f.read_bytes(), f
