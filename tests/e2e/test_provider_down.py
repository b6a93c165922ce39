"""A provider that cannot serve the run stops it fast with one line and exit 4, and the run resumes.

The failing provider is a small HTTP server on loopback (a thread of this process) that answers the
start-up check and then one status to every chat call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .conftest import API_KEY, Cli


class _Failing(BaseHTTPRequestHandler):
    status = 500
    body = b'{"error": {"type": "server_error", "message": "boom"}}'
    calls = 0
    first_call: float | None = None  # time.monotonic() of the first chat call

    def do_GET(self) -> None:
        self._send(200, b'{"object": "list", "data": []}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).calls += 1
        if type(self).first_call is None:
            type(self).first_call = time.monotonic()
        self._send(self.status, self.body)

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "text/html" if body.startswith(b"<") else "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing() -> Iterator[tuple[str, type[_Failing]]]:
    handler = type("Handler", (_Failing,), {"calls": 0, "first_call": None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def _items(path: Path, n: int = 6) -> Path:
    path.write_text("".join(f"item-{i}\n" for i in range(n)))
    return path


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and API_KEY not in stderr
    return lines[0]


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_stop_the_run_in_seconds(
    cli: Cli, tmp_path: Path, failing: tuple[str, type[_Failing]], status: int
) -> None:
    url, handler = failing
    handler.status = status
    handler.body = json.dumps({"error": {"type": "invalid_request_error", "message": "Incorrect API key"}}).encode()
    proc = cli.run("deploy", "--task", "Review", "--input", str(_items(tmp_path / "in.txt")), FLEET_BASE_URL=url)
    ended = time.monotonic()
    assert proc.returncode == 4, proc.stderr
    line = _one_line(proc.stderr)
    assert "refused the credentials" in line and f"answered {status}" in line and url.split("/")[2] in line, line
    # The stop is one health poll after the first refusal (start-up, however slow on a busy machine, is
    # not counted); a run that did not recognise the refusal would go on until the 60 s without success.
    assert handler.first_call is not None
    assert ended - handler.first_call < 30, ended - handler.first_call
    assert handler.calls <= 12  # one call per session at most: none is retried


def test_a_provider_with_no_success_stops_the_run_and_the_run_resumes(
    cli: Cli, tmp_path: Path, failing: tuple[str, type[_Failing]]
) -> None:
    url, handler = failing
    handler.status, handler.body = 200, b"<html><body>Sign in to the portal</body></html>"
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text("provider: {give_up_after_s: 3}\nverification: {fraction: 0, minimum: 0}\n")
    src = _items(tmp_path / "in.txt")
    proc = cli.run("deploy", "--task", "Review", "--input", str(src), "--config", str(cfg), FLEET_BASE_URL=url)
    ended = time.monotonic()
    assert proc.returncode == 4, proc.stderr
    line = _one_line(proc.stderr)
    assert "no call succeeded for 3 s" in line and "resumable" in line and "answered 200" in line, line
    assert handler.first_call is not None  # the stop comes the 3 s after the first failure, start-up aside
    assert ended - handler.first_call < 40, ended - handler.first_call
    code, runs = cli.json("status")
    run_id = runs["runs"][0]["run_id"]
    code, status = cli.json("status", run_id)
    assert status["errors"]["bad_response"] > 0  # each failure under its own kind, nothing else
    assert {k for k, n in status["errors"].items() if n} == {"bad_response"}
    assert status["sessions"].get("failed", 0) == 0  # the outage was not charged to the sessions
    # The provider is back (the simulated one): resume finishes the run.
    code, summary = cli.json("resume", run_id)
    assert code == 0, summary
    assert summary["status"] == "completed" and summary["sessions"]["completed"] == 6
