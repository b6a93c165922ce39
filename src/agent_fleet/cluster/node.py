"""What runs on each node of the Ray cluster: a node worker, an async actor that runs many attempts.

Each attempt (an :class:`~agent_fleet.cluster.workers.AttemptOrder`) is the built-in harness,
woken from the session's log in the run's PostgreSQL store, its model calls going to the run's one
gateway service with the session's harness token (:mod:`agent_fleet.spend.gateway_client`) — no provider key
ever reaches a node — and its hands (the partition's tools, sandboxes included) built here, on the
node that runs the harness. Every write of an attempt carries the run's lease epoch and the
attempt's own fence (:data:`~agent_fleet.session.lease.attempt_fence`): once the engine declares the
attempt lost, the store refuses what it still writes.

The store and the gateway client are opened on the first attempt, in the actor's event loop, and
shared by every attempt of the node worker.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.brain.harness import Harness
from agent_fleet.cluster.workers import AttemptOrder, error_answer
from agent_fleet.config import FleetConfig
from agent_fleet.hands.port import Hands, WorkspaceChanges
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.hands.shell import RUN_COMMAND
from agent_fleet.hands.toolbox import Toolbox
from agent_fleet.hands.web import EgressPolicy
from agent_fleet.session.lease import attempt_fence
from agent_fleet.session.store import open_store
from agent_fleet.spend.factory import price_table
from agent_fleet.spend.gateway_client import GatewayClient

__all__ = ["NodeSetup", "NodeWorkerActor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSetup:
    """What a node worker is started with (sent once, when its actor is created)."""

    store_url: str
    gateway_url: str
    run_id: str
    config: FleetConfig
    default_model: str
    sessions: int  # attempts it runs at once


class NodeWorkerActor:
    """The node worker (decorated with ``ray.remote`` by the executor)."""

    def __init__(self, setup: NodeSetup) -> None:
        self._setup = setup
        self._store: Any = None
        self._client: GatewayClient | None = None
        self._toolboxes: dict[tuple[str | None, WorkspaceChanges | None], Toolbox] = {}
        self._opening = asyncio.Lock()
        self.attempts = 0

    def where(self) -> dict[str, Any]:
        """Where this worker runs (the engine reads it to check placement)."""
        return {"host": socket.gethostname(), "pid": os.getpid()}

    async def ping(self) -> int:
        return self.attempts

    def cpu_seconds(self) -> float:
        """CPU time this worker's process has used (user + system)."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    async def _open(self) -> None:
        async with self._opening:
            if self._store is not None:
                return
            s = self._setup
            models = {m.name: m.model for m in s.config.models}
            self._client = GatewayClient(
                s.gateway_url, prices=price_table(s.config), aliases=models, default_model=s.default_model
            )
            store = open_store(s.store_url)
            await store.open()
            self._store = store

    async def run(self, order: AttemptOrder) -> dict[str, Any]:
        """One attempt: its outcome as ``{outcome, reason}``, or ``{error, ...}`` (``error_answer``)."""
        try:
            await self._open()
        except Exception as exc:
            return error_answer(exc)
        assert self._client is not None
        key = (order.input_root, order.changes)
        box = self._toolboxes.get(key)
        if box is None:
            box = self._toolboxes[key] = _toolbox(self._setup, order.input_root, order.changes)
        self.attempts += 1
        store = self._store
        store.fence(order.run_id, order.run_epoch)
        token = attempt_fence.set(order.fence)
        hands: Hands | None = None
        try:
            hands = box.hands_for(order.partition)
            gateway = self._client.session(order.token)
            brain = Harness(log=store, gateway=gateway, hands=hands, limits=order.limits)
            outcome = await brain.run(order.session_id, attempt=order.number)
            return {"outcome": outcome.outcome.value, "reason": outcome.reason}
        except Exception as exc:
            return error_answer(exc)
        finally:
            attempt_fence.reset(token)
            if hands is not None:
                await hands.aclose()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._store is not None:
            await self._store.close()


def _toolbox(setup: NodeSetup, input_root: str | None, changes: WorkspaceChanges | None = None) -> Toolbox:
    """The partition's tools on this node: files from the input root (the node must see it, e.g. a
    shared file system), sandboxes under this node's temp directory when fleet.yaml asks for them or
    the run keeps changes (worktrees of the run's base, edited on this node: the node captures a
    session's change into its log before the sandbox goes)."""
    hands = setup.config.hands
    edits = changes is not None  # its sessions edit worktrees of the run's base
    wants = edits or hands.files == "sandbox" or any(RUN_COMMAND.name in names for names in hands.tools.values())
    sandboxes = None
    if wants:
        base = Path(hands.sandbox_root or Path(tempfile.gettempdir()) / f"agent-fleet-{os.geteuid()}")
        use_bwrap = {"auto": None, "bwrap": True, "plain": False}[hands.isolation]
        root = base / setup.run_id
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
        sandboxes = LocalSandboxProvider(
            SandboxConfig(root=root, use_bwrap=use_bwrap, allow_network=hands.allow_network)
        )
    hosts = frozenset(hands.allowed_hosts) if hands.allowed_hosts is not None else None
    return Toolbox(
        run_id=setup.run_id,
        input_root=Path(input_root) if input_root else None,
        sandboxes=sandboxes,
        resources=ResourceSpec.of({"cpu": hands.cpu, "memory": hands.memory}),
        egress=EgressPolicy(allowed_hosts=hosts),
        mcp=None,
        shell=False,
        files_in_sandbox=hands.files == "sandbox",
        edits=edits,
        changes=changes,
    )
