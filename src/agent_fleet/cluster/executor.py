"""The engine's side of the Ray executor.

:meth:`RayExecutor.open` connects this process to the cluster as a Ray driver (``ray:auto``: the
cluster this machine belongs to; ``ray://HOST:PORT``: the cluster whose head listens there, as
``ray start --address`` takes it), serves the run's gateway to the nodes (the one
:class:`~agent_fleet.spend.service.GatewayService`, on this node's cluster address; credentials
never leave this process), and starts node workers: on each live node, ``workers_per_node`` async
actors pinned to it, each holding as many sessions as the node's resources allow for what one
session asks (fleet.yaml ``dispatch.ray``). A node with no room for one session gets none.

Admission, the run's lease, the plan and the dispatcher stay here. Per dispatch, :meth:`pool` gives
a :class:`~agent_fleet.cluster.workers.RayWorkerPool` of the node workers and :meth:`body` the
session body that runs attempts on them. A watch polls Ray's node table every health round: a node
Ray reports dead loses its workers (their sessions move to other nodes and resume from the log).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from agent_fleet.brain.port import Limits
from agent_fleet.clock import Clock
from agent_fleet.cluster import check_store
from agent_fleet.cluster.node import NodeSetup, NodeWorkerActor
from agent_fleet.cluster.workers import NodeWorker, RayBody, RayWorkerPool, SessionRequest, node_capacity
from agent_fleet.config import FleetConfig
from agent_fleet.engine import (
    Gateway,
    GatewayService,
    HealthConfig,
    LeaseStore,
    WorkerSpec,
    bump_attempt_fence,
    this_process,
)
from agent_fleet.errors import ConfigError, UnreachableError
from agent_fleet.hands.port import WorkspaceChanges

__all__ = ["RayExecutor", "ray_address"]

log = logging.getLogger(__name__)

_READY_TIMEOUT_S = 120.0  # node workers' processes start (and import the engine) within this


class RayUnreachable(UnreachableError):
    """No Ray cluster answered at the executor's address."""


def ray_address(executor: str) -> str:
    """What ``ray.init`` is given for an executor setting."""
    return "auto" if executor == "ray:auto" else executor.removeprefix("ray://")


class RayExecutor:
    """Node workers on a Ray cluster and the gateway service they call; see the module docstring."""

    def __init__(
        self,
        *,
        ray: Any,
        workers: dict[str, NodeWorker],
        service: GatewayService,
        store: LeaseStore,
        run_id: str,
        run_epoch: int | None,
        clock: Clock,
    ) -> None:
        self._ray = ray
        self.workers = workers
        self.service = service
        self._store = store
        self._run_id = run_id
        self._run_epoch = run_epoch
        self._clock = clock
        self._pools: list[RayWorkerPool] = []
        self.bodies: list[RayBody] = []
        self._watch: asyncio.Task[None] | None = None
        self._holder = this_process()
        self.node_cpu_s = 0.0  # CPU seconds the node workers used, read as they are stopped

    @classmethod
    async def open(
        cls,
        *,
        executor: str,
        config: FleetConfig,
        run_id: str,
        store_url: str,
        store: LeaseStore,
        run_epoch: int | None,
        gateway: Gateway,
        default_model: str,
        clock: Clock,
    ) -> RayExecutor:
        check_store(executor, store_url)
        import ray

        address = ray_address(executor)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayUnreachable(f"no Ray cluster at {executor}: {str(exc).splitlines()[0][:200]}") from None
        service = GatewayService(gateway)
        workers: dict[str, NodeWorker] = {}
        try:
            settings = config.dispatch.ray
            host = settings.gateway_host or _driver_address(ray)
            url = await service.start(host, settings.gateway_port)
            setup = NodeSetup(
                store_url=store_url,
                gateway_url=url,
                run_id=run_id,
                config=config,
                default_model=default_model,
                sessions=settings.sessions_per_worker,
            )
            workers = await _start_workers(ray, setup, config)
        except BaseException:
            for w in workers.values():
                with contextlib.suppress(Exception):
                    ray.kill(w.actor)
            await service.aclose()
            ray.shutdown()
            raise
        made = cls(
            ray=ray, workers=workers, service=service, store=store, run_id=run_id, run_epoch=run_epoch, clock=clock
        )
        made._watch = asyncio.get_running_loop().create_task(made._watch_nodes(), name="ray-node-watch")
        return made

    # -- per dispatch ------------------------------------------------------------------------------
    def pool(self, health: HealthConfig) -> RayWorkerPool:
        pool = RayWorkerPool(self._clock, health=health)
        for w in self.workers.values():
            pool.register(WorkerSpec(worker_id=w.worker_id, max_load=w.sessions))
        self._pools.append(pool)
        return pool

    def body(
        self, pool: RayWorkerPool, limits: Limits, input_root: str | None, changes: WorkspaceChanges | None = None
    ) -> RayBody:
        exc = self._ray.exceptions
        lost = (exc.RayActorError, exc.WorkerCrashedError, exc.NodeDiedError, exc.ObjectLostError, exc.RaySystemError)
        body = RayBody(
            workers=self.workers,
            pool=pool,
            fence=self._bump,
            token=lambda sid: self.service.tokens.issue(sid, harness=True),
            run_id=self._run_id,
            run_epoch=self._run_epoch,
            limits=limits,
            input_root=input_root,
            changes=changes,
            lost_errors=lost,
            cancel=self._cancel,
        )
        self.bodies.append(body)
        return body

    async def _bump(self, session_id: str) -> int:
        return await bump_attempt_fence(self._store, session_id, self._holder, now=time.time())

    def _cancel(self, ref: Any) -> None:
        with contextlib.suppress(Exception):
            self._ray.cancel(ref)

    def lose_node(self, node_id: str) -> list[str]:
        """Every worker on ``node_id`` is lost, in every pool; returns their ids."""
        gone = [w.worker_id for w in self.workers.values() if w.node_id == node_id]
        for pool in self._pools:
            for wid in gone:
                pool.lose(wid)
        return gone

    async def _watch_nodes(self) -> None:
        interval = 1.0
        while True:
            await self._clock.sleep(interval)
            try:
                nodes = await asyncio.to_thread(self._ray.nodes)
            except Exception as exc:  # the GCS restarting: ask again next round
                log.warning("cannot read the Ray node table: %s", exc)
                continue
            alive = {n["NodeID"] for n in nodes if n.get("Alive")}
            for node in {w.node_id for w in self.workers.values()} - alive:
                self.lose_node(node)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Stop the watch and the node workers, stop serving the gateway, leave the cluster."""
        task, self._watch = self._watch, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        closing = [w.actor.close.remote() for w in self.workers.values()]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 10.0)
        used = [w.actor.cpu_seconds.remote() for w in self.workers.values()]
        with contextlib.suppress(Exception):
            spent = await asyncio.wait_for(asyncio.gather(*used, return_exceptions=True), 10.0)
            self.node_cpu_s = sum(x for x in spent if isinstance(x, float))
        for w in self.workers.values():
            with contextlib.suppress(Exception):
                self._ray.kill(w.actor)
        await self.service.aclose()
        self._ray.shutdown()

    def __repr__(self) -> str:
        return f"<RayExecutor workers={len(self.workers)} gateway={self.service.root_url}>"


def _driver_address(ray: Any) -> str:
    """This process's node address in the cluster: where the nodes reach the gateway service."""
    me = ray.get_runtime_context().get_node_id()
    for n in ray.nodes():
        if n["NodeID"] == me:
            return str(n["NodeManagerAddress"])
    return str(ray.util.get_node_ip_address())


async def _start_workers(ray: Any, setup: NodeSetup, config: FleetConfig) -> dict[str, NodeWorker]:
    """Node workers on every live node with room for a session, started and answering."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    settings = config.dispatch.ray
    request = SessionRequest(num_cpus=settings.num_cpus, memory=settings.memory, resources=settings.resources)
    actor_class: Callable[..., Any] = ray.remote(NodeWorkerActor)
    workers: dict[str, NodeWorker] = {}
    for node in sorted(ray.nodes(), key=lambda n: str(n["NodeID"])):
        if not node.get("Alive"):
            continue
        node_id = str(node["NodeID"])
        most = settings.sessions_per_worker * settings.workers_per_node
        per_worker = node_capacity(node.get("Resources", {}), request, most=most) // settings.workers_per_node
        if per_worker < 1:
            continue
        for i in range(settings.workers_per_node):
            options = request.actor_options(per_worker)
            actor = actor_class.options(  # type: ignore[attr-defined]
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                max_concurrency=per_worker + 8,  # room for pings and close beside the attempts
                max_restarts=0,
                **options,
            ).remote(setup)
            wid = f"ray-{node_id[:10]}-{i}"
            workers[wid] = NodeWorker(wid, node_id, actor, per_worker)
    if not workers:
        raise ConfigError(
            f"no node of the Ray cluster has room for one session (dispatch.ray asks num_cpus={settings.num_cpus}, "
            f"memory={settings.memory}, resources={settings.resources})"
        )
    ready = [w.actor.ping.remote() for w in workers.values()]
    await asyncio.wait_for(asyncio.gather(*ready), _READY_TIMEOUT_S)
    return workers
