"""``agent-fleet queues`` and ``agent-fleet queues simulate`` as real processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

SCENARIO = """
objects:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: cq}
    spec:
      namespaceSelector: {}
      preemption: {withinClusterQueue: LowerPriority}
      resourceGroups:
      - coveredResources: [cpu, pods]
        flavors: [{name: default, resources: [{name: cpu, nominalQuota: 10}, {name: pods, nominalQuota: 2}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: team-a, namespace: default},
     spec: {clusterQueue: cq}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: WorkloadPriorityClass, metadata: {name: agent-prod}, value: 100}
workloads:
  - {name: w1, queue: team-a, priorityClass: agent-prod, requests: {cpu: 9, pods: 1}, createdAt: 0, runtime: 30}
  - {name: w2, queue: team-a, priority: 5, requests: {cpu: 1}, createdAt: 1}
  - {name: w3, queue: team-a, priority: 1, requests: {cpu: 1}, createdAt: 2}
  - {name: w4, queue: team-a, priority: 0, requests: {cpu: 11}, createdAt: 3}
events:
  - {at: 5, finish: w2}
"""


def fleet(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from agent_fleet.cli.app import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_simulate_json(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    proc = fleet("queues", "simulate", str(path), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["final"] == {
        "admitted": ["w3"],
        "pending": {"active": [], "inadmissible": ["w4"]},
        "finished": ["w1", "w2"],
        "preempted": [],
    }
    assert out["timeline"][0] == {
        "at": 0,
        "event": "created",
        "workload": "w1",
        "queue": "team-a",
        "cluster_queue": "cq",
    }


def test_simulate_invalid_scenario_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SCENARIO.replace("nominalQuota: 10", "nominalQuota: ten"))
    proc = fleet("queues", "simulate", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "ClusterQueue 'cq'" in proc.stderr and "nominalQuota" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_queues_from_fleet_yaml_config(tmp_path: Path) -> None:
    kueue = tmp_path / "kueue.yaml"
    kueue.write_text(
        "---\n".join(
            doc
            for doc in [
                "{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}\n",
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: agents}\nspec:\n"
                "  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [pods]\n"
                "    flavors: [{name: default, resources: [{name: pods, nominalQuota: 50}]}]\n",
            ]
        )
    )
    (tmp_path / "fleet.yaml").write_text("queues: kueue.yaml\n")
    proc = fleet("queues", "--config", "fleet.yaml", "--json", "--store", "sqlite:///none.db", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["cluster_queues"][0]["name"] == "agents"
    assert out["cluster_queues"][0]["resources"][0]["nominal_quota"] == "50"
    assert not (tmp_path / "none.db").exists()  # reading never creates a store


def test_queues_reads_the_live_snapshot_from_the_store(tmp_path: Path) -> None:
    from agent_fleet.admission import AdmissionController, Workload, default_objects
    from agent_fleet.clock import VirtualClock
    from agent_fleet.session.store import open_store

    ctl = AdmissionController(default_objects(1), VirtualClock())
    ctl.submit(Workload(name="a", queue="default"))
    ctl.submit(Workload(name="b", queue="default", created=1))
    ctl.settle()

    async def store() -> None:
        async with open_store(f"sqlite:///{tmp_path / 'fleet.db'}") as log:
            await log.put_snapshot("admission", ctl.snapshot())

    asyncio.run(store())
    proc = fleet("queues", "--json", cwd=tmp_path, env={"FLEET_STORE": f"sqlite:///{tmp_path / 'fleet.db'}"})
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["cluster_queues"]
    assert (row["admitted"], row["pending_inadmissible"]) == (1, 1)
    human = fleet("queues", "--store", f"sqlite:///{tmp_path / 'fleet.db'}", cwd=tmp_path)
    assert "default" in human.stdout and "pods[default] 1/1" in human.stdout


def test_queues_config_wins_over_the_store_and_a_missing_or_bad_file_is_exit_2(tmp_path: Path) -> None:
    from agent_fleet.admission import AdmissionController, default_objects
    from agent_fleet.clock import VirtualClock
    from agent_fleet.session.store import open_store

    store = f"sqlite:///{tmp_path / 'fleet.db'}"

    async def live() -> None:
        async with open_store(store) as log:
            await log.put_snapshot("admission", AdmissionController(default_objects(1), VirtualClock()).snapshot())

    asyncio.run(live())
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    fleet_yaml = tmp_path / "fleet.yaml"
    fleet_yaml.write_text("queues:\n" + "\n".join("  " + line for line in _objects_only(SCENARIO)) + "\n")
    proc = fleet("queues", "--config", str(fleet_yaml), "--json", cwd=tmp_path, env={"FLEET_STORE": store})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["source"] == f"configuration {fleet_yaml}" and [r["name"] for r in data["cluster_queues"]] == ["cq"]
    for bad, message in (
        (tmp_path / "missing.yaml", "No such file or directory"),
        (_write(tmp_path / "bad.yaml", "queues: [\n"), "is not valid YAML"),
    ):
        proc = fleet("queues", "--config", str(bad), cwd=tmp_path, env={"FLEET_STORE": store})
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def _objects_only(scenario: str) -> list[str]:
    lines = scenario.strip().splitlines()
    start, end = lines.index("objects:") + 1, lines.index("workloads:")
    return [line[2:] if line.startswith("  ") else line for line in lines[start:end]]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


FAIR_SCENARIO = """
fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}
objects:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: team-a}
    spec:
      cohortName: research
      namespaceSelector: {}
      preemption: {reclaimWithinCohort: Any}
      resourceGroups:
      - coveredResources: [pods]
        flavors: [{name: default, resources: [{name: pods, nominalQuota: 1}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: team-b}
    spec:
      cohortName: research
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [pods]
        flavors: [{name: default, resources: [{name: pods, nominalQuota: 1}]}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: shared}
    spec:
      cohortName: research
      namespaceSelector: {}
      resourceGroups:
      - coveredResources: [pods]
        flavors: [{name: default, resources: [{name: pods, nominalQuota: 4}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: a}, spec: {clusterQueue: team-a}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: b}, spec: {clusterQueue: team-b}}
workloads:
  - {name: a0, queue: a, createdAt: 0}
  - {name: b1, queue: b, createdAt: 0}
  - {name: b2, queue: b, createdAt: 0}
  - {name: b3, queue: b, createdAt: 0}
  - {name: b4, queue: b, createdAt: 0}
  - {name: b5, queue: b, createdAt: 0}
  - {name: a1, queue: a, createdAt: 1, runtime: 10}
  - {name: a2, queue: a, createdAt: 2, runtime: 10}
  - {name: a3, queue: a, createdAt: 3, runtime: 10}
"""


def test_simulate_with_fair_sharing(tmp_path: Path) -> None:
    # Both teams borrow the shared queue's four pods: team-b all of them at first. team-a's next
    # sessions take two back while team-b's share stays larger; a third would give team-a the
    # larger share, so it waits; team-b gets its pods back when team-a's sessions finish.
    path = tmp_path / "fair.yaml"
    path.write_text(FAIR_SCENARIO)
    proc = fleet("queues", "simulate", str(path), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    final = json.loads(proc.stdout)["final"]
    assert final["preempted"] == [
        {"name": "b1", "by": "a1", "reason": "InCohortFairSharing"},
        {"name": "b2", "by": "a2", "reason": "InCohortFairSharing"},
    ]
    assert final["finished"] == ["a1", "a2", "a3"]
    assert final["admitted"] == ["a0", "b1", "b2", "b3", "b4", "b5"]
