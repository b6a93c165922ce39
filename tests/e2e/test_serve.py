"""``agent-fleet serve`` as a real process on loopback, against the simulated provider over HTTP.

Two runs submitted at once go through one gateway (the provider never sees more calls in flight than
its one cap) and both complete; a team's token reads none of another team's runs; tokens appear in
neither the store file nor the server's output.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.sim.provider import LogNormalLatency, SimConfig, sim_provider_process
from agent_fleet.testing.serve_process import serve_process as start_serve

from .conftest import API_KEY, write_lines

CAP = 3  # the gateway's one concurrency limit, for every run of the server
TOKEN_A = "team-a-" + "3b9d1f" * 5
TOKEN_B = "team-b-" + "c04e7a" * 5
TOKEN_C = "team-c-" + "5e6f70" * 5
ADMIN = "admin-" + "9a8b7c" * 5

FLEET_YAML = f"""
rate_limit: {{baseline_concurrency: {CAP}, adaptive: false}}
teams:
  alpha: {{token_env: ALPHA_TOKEN, queues: [default/default], budget_usd: 50}}
  beta: {{token_env: BETA_TOKEN}}
  gamma: {{token_env: GAMMA_TOKEN, budget_usd: 0.00001}}
"""


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[str]
    cwd: Path
    store: Path

    def client(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, trust_env=False)


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=LogNormalLatency(median=0.05, sigma=0.3), seed=11)) as url:
        yield url


@contextlib.contextmanager
def serve_process(cwd: Path, provider: str, fleet_yaml: str = FLEET_YAML) -> Iterator[Served]:
    """``agent-fleet serve --port 0`` in ``cwd``; yields once it listens, SIGTERM on the way out."""
    (cwd / "fleet.yaml").write_text(fleet_yaml)
    store = cwd / "fleet.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        FLEET_BASE_URL=provider,
        FLEET_API_KEY=API_KEY,
        ALPHA_TOKEN=TOKEN_A,
        BETA_TOKEN=TOKEN_B,
        GAMMA_TOKEN=TOKEN_C,
        FLEET_ADMIN_TOKEN=ADMIN,
    )
    with start_serve(cwd, env, store=f"sqlite:///{store}") as s:
        yield Served(s.url, s.proc, cwd, store)


@pytest.fixture
def served(tmp_path: Path, provider: str) -> Iterator[Served]:
    with serve_process(tmp_path, provider) as s:
        yield s


def _folder(served: Served, team: str) -> Path:
    """A team's input folder (``serve`` makes each team's default one, ``inputs/NAME``, on start)."""
    folder = served.cwd / "inputs" / team
    assert folder.is_dir()
    return folder


def _wait_ended(client: httpx.Client, run_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/v1/runs/{run_id}").json()
        if body["status"] not in ("running", "created"):
            return dict(body)
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} did not end")


def _provider_stats(provider: str) -> dict[str, Any]:
    with urllib.request.urlopen(provider.removesuffix("/v1") + "/sim/stats", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def _reset(provider: str) -> None:
    req = urllib.request.Request(provider.removesuffix("/v1") + "/sim/reset", method="POST")
    with urllib.request.urlopen(req, timeout=5):
        pass


def test_two_runs_at_once_share_one_gateway(served: Served, provider: str) -> None:
    write_lines(_folder(served, "alpha") / "a.txt", 24)
    write_lines(_folder(served, "beta") / "b.txt", 16)
    _reset(provider)
    with served.client(TOKEN_A) as a, served.client(TOKEN_B) as b:
        ra = a.post(
            "/v1/runs",
            json={"task": "summarize each url", "input_path": "inputs/alpha/a.txt", "agents": 8, "embedder": "lexical"},
        )
        rb = b.post(
            "/v1/runs",
            json={"task": "summarize each url", "input_path": "inputs/beta/b.txt", "agents": 8, "embedder": "lexical"},
        )
        assert ra.status_code == rb.status_code == 202, (ra.text, rb.text)
        run_a, run_b = ra.json()["run_id"], rb.json()["run_id"]
        # both are live in the one server at once
        assert a.get(f"/v1/runs/{run_a}").json()["status"] == "running"
        assert b.get(f"/v1/runs/{run_b}").json()["status"] == "running"
        done_a, done_b = _wait_ended(a, run_a), _wait_ended(b, run_b)
        ends = [
            [e["type"] for e in c.get(f"/v1/runs/{r}/events").json()["events"]] for c, r in ((a, run_a), (b, run_b))
        ]
    assert done_a["status"] == done_b["status"] == "completed", (done_a, done_b, ends)
    assert done_a["summary"]["partitions"] == done_b["summary"]["partitions"] == 8
    assert done_a["results_raw"] == 24 and done_b["results_raw"] == 16
    stats = _provider_stats(provider)
    assert stats["requests_total"] >= 16, stats  # at least one call per session of both runs
    assert 1 < stats["max_in_flight"] <= CAP


def test_team_isolation_and_no_token_at_rest(served: Served) -> None:
    write_lines(_folder(served, "alpha") / "a.txt", 6)
    with served.client(TOKEN_A) as a, served.client(TOKEN_B) as b, served.client(ADMIN) as admin:
        run_a = a.post(
            "/v1/runs",
            json={"task": "summarize each url", "input_path": "inputs/alpha/a.txt", "agents": 2, "embedder": "lexical"},
        ).json()["run_id"]
        for path in ("", "/events", "/results", "/changes"):
            r = b.get(f"/v1/runs/{run_a}{path}")
            assert r.status_code == 404, (path, r.text)
            assert set(r.json()) == {"error"} and r.json()["error"]["type"] == "not_found"
        for path in ("/cancel", "/resume"):
            assert b.post(f"/v1/runs/{run_a}{path}").status_code == 404
        assert b.post(f"/v1/runs/{run_a}/budget", json={"tokens": 5000}).status_code == 404
        assert run_a not in [r["run_id"] for r in b.get("/v1/runs").json()["runs"]]
        assert run_a in [r["run_id"] for r in a.get("/v1/runs").json()["runs"]]
        assert admin.get(f"/v1/runs/{run_a}").status_code == 200
        assert a.get(f"/v1/runs/{run_a}/events").json()["events"][0]["type"] == "run_created"
        # a team's queues bound where it may submit; unknown callers get nothing
        assert a.post("/v1/runs", json={"task": "t", "queue": "nowhere"}).status_code == 400
        with served.client("not-a-token") as stranger:
            r = stranger.get("/v1/runs")
        assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized"
        assert _wait_ended(a, run_a)["status"] == "completed"
        changes = a.get(f"/v1/runs/{run_a}/changes").json()  # a list input: no code changes are kept
        assert changes["base"] is None and changes["changes"] == [] and "not captured" in changes["note"]
        # the dashboard and /metrics show every team's runs: the admin's token only
        assert a.get("/metrics").status_code == 401
        assert b.get("/").status_code == 401
        metrics = admin.get("/metrics")
        assert metrics.status_code == 200 and "fleet_" in metrics.text
        with httpx.Client(base_url=served.url, auth=("admin", ADMIN), trust_env=False) as browser:
            assert browser.get("/").status_code == 200  # the page, as a browser's Basic login gets it
            assert browser.get("/api/overview").status_code == 200
    served.proc.send_signal(signal.SIGTERM)
    out, err = served.proc.communicate(timeout=60)
    blobs = [served.store.read_bytes(), out.encode(), err.encode()]
    blobs += [p.read_bytes() for p in served.cwd.rglob("*") if p.is_file()]
    for token in (TOKEN_A, TOKEN_B, ADMIN):
        assert not any(token.encode() in blob for blob in blobs)


def test_errors_have_one_shape(served: Served) -> None:
    with served.client(ADMIN) as admin:
        cases = [
            admin.get("/v1/runs/nope"),
            admin.post("/v1/runs", content=b"{not json"),
            admin.post("/v1/runs", json={"task": ""}),
            admin.post("/v1/runs", json={"task": "t", "agents": 0}),
            admin.post("/v1/runs", json={"task": "t", "input_path": "../../etc/passwd"}),
            admin.delete("/v1/runs"),
            admin.get("/v1/nothing-here"),
        ]
    for r in cases:
        assert 400 <= r.status_code < 500, r.text
        body = r.json()
        assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body


def test_a_team_budget_bounds_all_its_runs(served: Served) -> None:
    write_lines(_folder(served, "gamma") / "e.txt", 8)
    write_lines(_folder(served, "alpha") / "e.txt", 8)
    body = {"task": "summarize each url", "input_path": "inputs/gamma/e.txt", "agents": 4, "embedder": "lexical"}
    with served.client(TOKEN_C) as c, served.client(TOKEN_A) as a:
        first = c.post("/v1/runs", json=body).json()["run_id"]
        done = _wait_ended(c, first)
        assert done["status"] == "paused", done  # $0.00001 covers no session's calls
        assert done["sessions"].get("paused", 0) >= 1
        # another team's run on the same server is not charged to gamma's account
        other = a.post("/v1/runs", json={**body, "input_path": "inputs/alpha/e.txt"}).json()["run_id"]
        assert _wait_ended(a, other)["status"] == "completed"


def _cli(served: Served, *args: str, token: str = TOKEN_A) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_SERVER=served.url, FLEET_TOKEN=token)
    cmd = [sys.executable, "-m", "agent_fleet.cli", *args]
    return subprocess.run(cmd, cwd=served.cwd, env=env, capture_output=True, text=True, timeout=240)


def test_cli_against_the_server(served: Served) -> None:
    write_lines(_folder(served, "alpha") / "c.txt", 6)
    deploy = (
        "deploy",
        "--task",
        "summarize each url",
        "--input",
        "inputs/alpha/c.txt",
        "--agents",
        "2",
        "--embedder",
        "lexical",
    )
    detached = _cli(served, *deploy, "--detach")
    assert detached.returncode == 0, detached.stderr
    run_id = detached.stdout.strip()
    assert run_id.startswith("run-")
    with served.client(TOKEN_A) as a:
        assert _wait_ended(a, run_id)["status"] == "completed"
    status = _cli(served, "status", run_id, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["results_raw"] == 6
    events = _cli(served, "events", f"{run_id}.s00000", "--json")
    assert events.returncode == 0, events.stderr
    types = [e["type"] for e in json.loads(events.stdout)["events"]]
    assert types[0] == "session_created" and "session_completed" in types
    raised = _cli(served, "budget", "raise", run_id, "--tokens", "200000", "--json")
    assert raised.returncode == 0, raised.stderr
    assert json.loads(raised.stdout)["data"] == {"tokens": 200000}
    # deploy without --detach waits and prints the summary; exit code as a local deploy's
    waited = _cli(served, *deploy, "--json")
    assert waited.returncode == 0, waited.stderr
    summary = json.loads(waited.stdout)
    assert summary["status"] == "completed" and summary["results_raw"] == 6
    # another team's token: the run does not exist for it (exit 2, one line)
    other = _cli(served, "status", run_id, token=TOKEN_B)
    assert other.returncode == 2 and other.stderr.count("\n") == 1 and "no run" in other.stderr
    refused = _cli(served, *deploy, "--provider", "openai")
    assert refused.returncode == 2 and "--provider" in refused.stderr


@pytest.fixture(scope="module")
def slow_provider() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=LogNormalLatency(median=0.4, sigma=0.2), seed=12)) as url:
        yield url


@pytest.mark.slow
def test_kill_9_and_restart_continue_the_run(tmp_path: Path, slow_provider: str) -> None:
    (tmp_path / "inputs" / "alpha").mkdir(parents=True)
    write_lines(tmp_path / "inputs" / "alpha" / "d.txt", 30)
    body = {"task": "summarize each url", "input_path": "inputs/alpha/d.txt", "agents": 10, "embedder": "lexical"}
    with serve_process(tmp_path, slow_provider) as first, first.client(TOKEN_A) as a:
        run_id = a.post("/v1/runs", json=body).json()["run_id"]
        deadline = time.monotonic() + 120
        while a.get(f"/v1/runs/{run_id}").json()["sessions"].get("completed", 0) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        first.proc.kill()  # SIGKILL: nothing of the server runs its way out
        first.proc.wait(timeout=30)
    with serve_process(tmp_path, slow_provider) as second, second.client(TOKEN_A) as a:
        done = _wait_ended(a, run_id)
        assert done["status"] == "completed", done
        assert done["sessions"] == {"completed": 10}
        assert done["results_raw"] == 30  # every item once: nothing lost, nothing recorded twice
        events = a.get(f"/v1/runs/{run_id}/events").json()["events"]
        assert [e["type"] for e in events].count("run_resumed") == 1


def test_cancel_then_resume(served: Served) -> None:
    write_lines(_folder(served, "beta") / "f.txt", 40)
    body = {"task": "summarize each url", "input_path": "inputs/beta/f.txt", "agents": 8, "embedder": "lexical"}
    with served.client(TOKEN_B) as b:
        run_id = b.post("/v1/runs", json=body).json()["run_id"]
        cancelled = b.post(f"/v1/runs/{run_id}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        stopped = _wait_ended(b, run_id)
        assert stopped["status"] == "interrupted", stopped
        again = b.post(f"/v1/runs/{run_id}/cancel")
        assert again.status_code == 409 and again.json()["error"]["type"] == "conflict"
        assert b.post(f"/v1/runs/{run_id}/resume").status_code == 202
        done = _wait_ended(b, run_id)
        assert done["status"] == "completed", done
        assert done["results_raw"] == 40
        results = b.get(f"/v1/runs/{run_id}/results", params={"limit": 5}).json()
        assert results["final"] is True and len(results["results"]) == 5
        assert results["total"] == done["summary"]["results_unique"]
