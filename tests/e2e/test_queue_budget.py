"""fleet.yaml ``budgets.queue_usd`` binds ``deploy``: a LocalQueue's dollars cover every run of that queue in
the store. The first run pauses within one call of the cap (exit 3, resumable); the next run in the same
queue starts paused (nothing sent); a run in another queue is not charged to it."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions, deploy
from agent_fleet.session import open_store
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.provider import SimConfig

from .conftest import write_lines

CAP = Decimal("0.0012")
KUEUE = """
queues:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: shared}
    spec:
      namespaceSelector: {}
      resourceGroups:
      - {coveredResources: [pods], flavors: [{name: default, resources: [{name: pods, nominalQuota: 4}]}]}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: research, namespace: default},
     spec: {clusterQueue: shared}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: support, namespace: default},
     spec: {clusterQueue: shared}}
"""


async def test_a_queue_budget_binds_every_run_of_the_queue(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(
        f"budgets: {{queue_usd: {{research: {CAP}}}}}\nverification: {{minimum: 0}}\n{KUEUE}"
    )
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    items = write_lines(tmp_path / "urls.txt", 40)

    def options(queue: str, out: str) -> RunOptions:
        return RunOptions(
            task="Summarise each page",
            input_path=str(items),
            agents=4,
            embedder="lexical",
            queue=queue,
            config_path=str(tmp_path / "fleet.yaml"),
            out_dir=str(tmp_path / out),
        )

    async with SimProvider(SimConfig(latency=0.02, seed=5)) as sim:
        kwargs = {"store_url": store, "env": {"FLEET_BASE_URL": sim.base_url, "FLEET_API_KEY": "sk-test"}}
        first = await deploy(options("research", "one"), **kwargs)  # type: ignore[arg-type]
        sent = sim.stats()["requests_total"]
        second = await deploy(options("research", "two"), **kwargs)  # type: ignore[arg-type]
        assert sim.stats()["requests_total"] == sent + 1  # only the provider probe: no call of the second run
        other = await deploy(options("default/support", "three"), **kwargs)  # type: ignore[arg-type]

    assert first.status == second.status == "paused" and other.status == "completed"
    assert second.summary["llm_calls"] == 0
    async with open_store(store) as log:
        events = await log.events_of_run(first.run_id, [EventType.MODEL_RESPONSE])
    calls = [Decimal(e.data["response"]["cost_usd"]) for e in events]
    spent = Decimal(first.summary["cost_usd_exact"])
    assert CAP <= spent < CAP + max(calls)  # within one call of the queue's cap
