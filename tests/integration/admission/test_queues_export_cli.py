"""``agent-fleet queues export`` as a real process: the queues as Kueue v1beta2 YAML that
``queues simulate`` reads back to the same decisions, and ``--jobs``: the sandbox Jobs of a plan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "admission"))
from kueue_v1beta2_rules import API, check
from test_queues_cli import SCENARIO

KEY = "sk-live-do-not-leak-0123456789"


def fleet(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed ``agent-fleet`` command (the venv's script), with this checkout's package."""
    script = Path(sys.executable).with_name("agent-fleet")
    command = [str(script)] if script.exists() else [shutil.which("agent-fleet") or "agent-fleet"]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENAI_API_KEY": KEY, **(env or {})},
    )


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def test_without_queues_the_default_queue_is_written_sized_like_serve(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text("rate_limit: {baseline_concurrency: 8}\nhands: {cpu: 0.5, memory: 1Gi}\n")
    proc = fleet("queues", "export", "--config", "fleet.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    docs = documents(proc.stdout)
    assert [d["kind"] for d in docs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    assert all(d["apiVersion"] == API and check(d) == [] for d in docs)
    resources = docs[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resources == [
        {"name": "pods", "nominalQuota": 8},
        {"name": "cpu", "nominalQuota": 4},
        {"name": "memory", "nominalQuota": "8Gi"},
    ]
    bare = fleet("queues", "export", cwd=tmp_path)  # no --config: fleet.yaml's defaults (50 sessions)
    assert documents(bare.stdout)[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 50


def test_export_to_a_file_then_simulate_decides_the_same(tmp_path: Path) -> None:
    scenario = yaml.safe_load(SCENARIO)
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump_all(scenario["objects"]))
    (tmp_path / "fleet.yaml").write_text("queues: kueue.yaml\n")
    proc = fleet("queues", "export", "--config", "fleet.yaml", "--out", "exported.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    docs = documents((tmp_path / "exported.yaml").read_text())
    assert all(check(d) == [] for d in docs)
    (tmp_path / "before.yaml").write_text(SCENARIO)
    (tmp_path / "after.yaml").write_text(yaml.safe_dump({**scenario, "objects": docs}))
    before = fleet("queues", "simulate", "before.yaml", "--json", cwd=tmp_path)
    after = fleet("queues", "simulate", "after.yaml", "--json", cwd=tmp_path)
    assert before.returncode == after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == json.loads(before.stdout)


def test_what_kueue_refuses_is_exit_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: Team_A}\n"
        "spec: {namespaceSelector: {}}\n"
    )
    for args in (("--config", "bad.yaml"), ("--config", "missing.yaml")):
        proc = fleet("queues", "export", *args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and proc.stdout == ""
    assert (
        "ClusterQueue 'Team_A': metadata.name" in fleet("queues", "export", "--config", "bad.yaml", cwd=tmp_path).stderr
    )


TEAMS = """
queues:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: research}
    spec:
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [pods, cpu, memory]
        flavors: [{name: default, resources: [{name: pods, nominalQuota: 4}, {name: cpu, nominalQuota: 8},
                                              {name: memory, nominalQuota: 16Gi}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: pods-only}
    spec:
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [pods]
        flavors: [{name: default, resources: [{name: pods, nominalQuota: 4}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: team-a, namespace: ml},
     spec: {clusterQueue: research}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: narrow}, spec: {clusterQueue: pods-only}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {name: agent-prod}, value: 100}
hands: {cpu: 1, memory: 2Gi}
"""
JOB_FLAGS = ("--agent-cmd", "claude -p {task} < {partition}", "--image", "registry.example/agent:1")


def test_jobs_of_a_plan_are_labelled_for_kueue_and_valid_kubernetes(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(TEAMS)
    (tmp_path / "urls.txt").write_text("".join(f"https://site.example/{i}\n" for i in range(5)))
    args = ("queues", "export", "--jobs", "--config", "fleet.yaml", "--task", "Summarise", "--input", "urls.txt")
    gateway = ("--gateway-url", "http://gateway.fleet:8787")
    proc = fleet(
        *args, "--agents", "3", "--queue", "ml/team-a", "--priority", "agent-prod", *JOB_FLAGS, *gateway, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and KEY not in proc.stdout
    docs = documents(proc.stdout)
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert len(jobs) == 3 and len(docs) == 6
    maps = [d["data"]["partition.txt"] for d in docs if d["kind"] == "ConfigMap"]
    assert sorted("".join(maps).split()) == sorted(f"https://site.example/{i}" for i in range(5))
    for doc in docs:
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
    for job in jobs:
        labels = job["metadata"]["labels"]
        assert (
            labels["kueue.x-k8s.io/queue-name"] == "team-a" and labels["kueue.x-k8s.io/priority-class"] == "agent-prod"
        )
        assert job["metadata"]["namespace"] == "ml" and job["spec"]["suspend"] is True
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"] == {
            "requests": {"cpu": 1, "memory": "2Gi"},
            "limits": {"cpu": 2, "memory": "4Gi"},
        }
        assert container["command"][2] == "claude -p Summarise < /fleet/partition.txt"


def test_jobs_warn_when_kueue_would_hold_them_and_refuse_a_credential(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(TEAMS)
    base = ("queues", "export", "--jobs", "--config", "fleet.yaml", *JOB_FLAGS, "--gateway-url", "http://gw:8787")
    narrow = fleet(*base, "--task", "Say hi", "--queue", "narrow", cwd=tmp_path)
    assert narrow.returncode == 0, narrow.stderr
    assert "ClusterQueue 'pods-only' does not cover cpu" in narrow.stderr
    assert "does not cover memory" in narrow.stderr
    leaked = fleet(*base, "--task", f"Use the key {KEY}", "--queue", "ml/team-a", cwd=tmp_path)
    assert leaked.returncode == 2 and KEY not in leaked.stderr and leaked.stdout == ""
    assert "would carry a credential" in leaked.stderr
    for given, flag in ((("--task", "x", "--agent-cmd", "x"), "--image"), ((), "--task")):
        proc = fleet("queues", "export", "--jobs", "--config", "fleet.yaml", *given, cwd=tmp_path)
        assert proc.returncode == 2 and f"--jobs needs {flag}" in proc.stderr
    unknown = fleet(*base, "--task", "x", "--queue", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown --queue 'nope'" in unknown.stderr


def test_jobs_request_what_the_sessions_request_for_admission(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(TEAMS)
    base = ("queues", "export", "--jobs", "--config", "fleet.yaml", *JOB_FLAGS, "--gateway-url", "http://gw:8787")
    proc = fleet(*base, "--task", "Say hi", "--queue", "ml/team-a", "--requests", "cpu=2,memory=3Gi", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (job,) = [d for d in documents(proc.stdout) if d["kind"] == "Job"]
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": 2, "memory": "3Gi"}, "limits": {"cpu": 4, "memory": "6Gi"}}
    # what the queue does not cover, or can never hold, is refused as deploy refuses it
    for requests, words in (("example.com/gpu=1", "does not cover example.com/gpu"), ("cpu=9", "ExceedsMaxQuota")):
        refused = fleet(*base, "--task", "Say hi", "--queue", "ml/team-a", "--requests", requests, cwd=tmp_path)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
