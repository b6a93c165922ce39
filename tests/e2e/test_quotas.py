"""Admission counts every resource a session requests, as Kueue and ``queues export --jobs`` do.

A ClusterQueue with a ``cpu`` quota of 2 and ``hands.cpu: 1``: ``deploy`` never runs more than two
sessions at once — the simulated provider never sees more than two calls in flight, and no two session
lifetimes in the log overlap by more than two. The same queue covers a custom resource
``example.com/licence`` with a quota of 1: sessions that request one (``--requests``) run one at a time.
``queues simulate`` on the same objects, with workloads requesting the same, admits the same numbers.
A request the queue can never admit is refused before a run is recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from agent_fleet.cli.app import build_app
from agent_fleet.domain.events import EventType
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, sim_provider_process

OBJECTS = """
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: team}
    spec:
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [pods, cpu, example.com/licence]
        flavors:
        - name: default
          resources: [{name: pods, nominalQuota: 10}, {name: cpu, nominalQuota: 2},
                      {name: example.com/licence, nominalQuota: 1}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: team, namespace: default},
     spec: {clusterQueue: team}}
"""
FLEET_YAML = f"""
hands: {{cpu: 1}}
rate_limit: {{baseline_concurrency: 10, adaptive: false}}
verification: {{fraction: 0, minimum: 0}}
queues:{OBJECTS}"""
SESSIONS = 6


def _scenario(requests: dict[str, Any]) -> dict[str, Any]:
    one = {"queue": "team", "requests": requests, "createdAt": 0, "runtime": 10}
    return {"objects": yaml.safe_load(OBJECTS), "workloads": [{"name": f"w{i}", **one} for i in range(SESSIONS)]}


# The same objects, and workloads that request what each run's sessions request (in the export round trip too).
SCENARIOS = {
    "cpu quota 2, one cpu each": _scenario({"cpu": 1, "pods": 1}),
    "one licence": _scenario({"cpu": 1, "pods": 1, "example.com/licence": 1}),
}


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.3, seed=7)) as url:
        yield url


def _overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def _session_lifetimes(store: str, run_id: str) -> list[tuple[float, float]]:
    async with open_store(store) as log:
        events = await log.events_of_run(run_id)
    spans: dict[str, list[float]] = {}
    for ev in events:
        if ev.type in (EventType.SESSION_STARTED, EventType.SESSION_RESUMED):
            spans.setdefault(ev.session_id, [ev.time, ev.time])
        elif ev.type in (EventType.SESSION_COMPLETED, EventType.SESSION_PAUSED, EventType.SESSION_FAILED):
            spans[ev.session_id][1] = ev.time
    return [(a, b) for a, b in spans.values()]


def _simulated_most(tmp_path: Path, name: str) -> int:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIOS[name]))
    result = CliRunner().invoke(build_app(), ["queues", "simulate", str(scenario), "--json"])
    assert result.exit_code == 0, result.output
    timeline = json.loads(result.stdout)["timeline"]
    admitted: dict[str, float] = {}
    spans = []
    for entry in timeline:
        if entry["event"] == "admitted":
            admitted[entry["workload"]] = entry["at"]
        elif entry["event"] == "finished":
            spans.append((admitted.pop(entry["workload"]), entry["at"] - 1e-9))
    assert not admitted and len(spans) == 6
    return _overlap(spans)


def _sim(url: str, path: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(url.removesuffix("/v1") + path, method=method)
    with urllib.request.urlopen(request, timeout=5) as resp:
        return dict(json.loads(resp.read()))


@pytest.mark.parametrize(
    ("extra", "sessions_at_once", "scenario"),
    [
        ((), 2, "cpu quota 2, one cpu each"),  # cpu 2 / hands.cpu 1
        (("--requests", "example.com/licence=1"), 1, "one licence"),
    ],
)
def test_a_quota_on_any_resource_bounds_the_sessions_and_simulate_agrees(
    tmp_path: Path, slow_sim: str, extra: tuple[str, ...], sessions_at_once: int, scenario: str
) -> None:
    (tmp_path / "fleet.yaml").write_text(FLEET_YAML)
    (tmp_path / "urls.txt").write_text("".join(f"https://example.com/page-{i}\n" for i in range(12)))
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_BASE_URL=slow_sim, FLEET_API_KEY="sk-quota-test", FLEET_STORE=store)
    _sim(slow_sim, "/sim/reset", "POST")
    args = ["deploy", "--task", "Summarise each page", "--input", "urls.txt", "--agents", str(SESSIONS)]
    args += ["--queue", "team", "--config", "fleet.yaml", "--embedder", "lexical", "--json", *extra]
    proc = subprocess.run(
        [sys.executable, "-m", "agent_fleet.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    summary = json.loads(proc.stdout or "{}")
    assert proc.returncode == 0 and summary["status"] == "completed", proc.stderr
    assert summary["sessions"]["completed"] == SESSIONS
    stats = _sim(slow_sim, "/sim/stats")
    assert stats["max_in_flight"] == sessions_at_once, stats  # measured at the provider
    lifetimes = asyncio.run(_session_lifetimes(store, summary["run_id"]))
    assert len(lifetimes) == SESSIONS and _overlap(lifetimes) <= sessions_at_once
    assert _simulated_most(tmp_path, scenario) == sessions_at_once  # queues simulate decides the same


def test_a_request_the_queue_can_never_admit_is_refused_before_a_run(tmp_path: Path, slow_sim: str) -> None:
    (tmp_path / "fleet.yaml").write_text(FLEET_YAML)
    (tmp_path / "urls.txt").write_text("https://example.com/a\n")
    runner = CliRunner()
    env = {"FLEET_BASE_URL": slow_sim, "FLEET_API_KEY": "sk-test", "FLEET_STORE": f"sqlite:///{tmp_path / 'f.db'}"}
    base = ["deploy", "--task", "Summarise each page", "--input", str(tmp_path / "urls.txt"), "--queue", "team"]
    base += ["--config", str(tmp_path / "fleet.yaml")]
    for requests, words in (
        ("cpu=3", "ExceedsMaxQuota"),
        ("example.com/gpu=1", "does not cover example.com/gpu"),
        ("cpu=lots", "not a quantity"),
    ):
        result = runner.invoke(build_app(), [*base, "--requests", requests], env=env)
        assert result.exit_code == 2, (requests, result.output)
        assert words in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "f.db").exists() or _no_runs(f"sqlite:///{tmp_path / 'f.db'}")


def _no_runs(store: str) -> bool:
    async def read() -> bool:
        async with open_store(store) as log:
            return not await log.list_runs(limit=1)

    return asyncio.run(read())
