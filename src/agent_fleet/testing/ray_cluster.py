"""A local Ray cluster on loopback for tests and benchmarks: a head and worker nodes, each a
``ray start`` of its own in a process group of its own, under a temp directory of its own.

Every process a node starts stays in that node's process group (its raylet, its agents, the head's
GCS) or descends from one that does (the workers the raylet starts, in groups of their own), so
:meth:`LocalRayCluster.kill_node` kills one node — raylet and workers — at once, and
:meth:`LocalRayCluster.stop` ends exactly the processes this cluster started (never ``ray stop``,
which would end every Ray process of the user). Ports are picked free; the dashboard is off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LOOPBACK", "LocalRayCluster", "RayNode", "node_processes"]

# Ray turns 127.0.0.1 into the machine's outward address; another loopback address it keeps as given,
# so every node, the driver and the gateway service talk over loopback only.
LOOPBACK = "127.0.0.2"
_FAST_FAILURE = '{"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_timeout_ms": 500}'


def node_processes(pgid: int) -> list[int]:
    """The live processes of a node: those in its process group and every descendant of them."""
    parents: dict[int, int] = {}
    groups: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)], groups[int(entry)] = int(fields[1]), int(fields[2])
    found = {pid for pid, group in groups.items() if group == pgid}
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class RayNode:
    name: str
    pgid: int  # the node's process group: its raylet and every worker it started
    cpus: float
    stopped: bool = False


@dataclass(slots=True)
class LocalRayCluster:
    """``start(workers=2)``; ``address`` is the head's GCS address (``ray://`` + it for the executor)."""

    root: Path
    address: str = ""
    nodes: list[RayNode] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        *,
        workers: int = 2,
        head_cpus: float = 0,
        worker_cpus: float = 1,
        memory: int = 2 * 1024**3,
        resources: str | None = None,
    ) -> LocalRayCluster:
        """A head (``head_cpus``: 0 keeps sessions off it) and ``workers`` worker nodes, all on a loopback address.
        Ray declares a silent node dead after about two seconds (fast health checks)."""
        cluster = cls(Path(tempfile.mkdtemp(prefix="fleet-ray-")))
        try:
            port = _free_port()
            head = ["--head", "--port", str(port), "--system-config", _FAST_FAILURE]
            cluster._start_node("head", head, cpus=head_cpus, memory=memory)
            cluster.address = f"{LOOPBACK}:{port}"
            for i in range(workers):
                extra = ["--address", cluster.address]
                if resources:
                    extra += ["--resources", resources]
                cluster._start_node(f"worker-{i}", extra, cpus=worker_cpus, memory=memory)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start_node(self, name: str, extra: list[str], *, cpus: float, memory: int) -> str:
        ray = str(Path(sys.executable).with_name("ray"))
        args = [
            ray, "start", *extra,
            "--node-ip-address", LOOPBACK,
            "--num-cpus", str(cpus),
            "--memory", str(memory),
            "--object-store-memory", str(80 * 1024**2),
            "--disable-usage-stats",
            "--dashboard-agent-listen-port", str(_free_port()),
            "--runtime-env-agent-port", str(_free_port()),
            "--metrics-export-port", str(_free_port()),
        ]  # fmt: skip
        if "--head" in extra:
            args += [
                "--temp-dir",
                str(self.root),
                "--include-dashboard",
                "false",
                "--dashboard-port",
                str(_free_port()),
            ]
            args += ["--ray-client-server-port", str(_free_port())]
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )
        self.nodes.append(RayNode(name, proc.pid, cpus))
        out, _ = proc.communicate(timeout=180)
        if proc.returncode != 0:
            raise RuntimeError(f"ray start ({name}) failed:\n{out[-3000:]}")
        return out

    def worker_nodes(self) -> list[RayNode]:
        return [n for n in self.nodes if n.name != "head" and not n.stopped]

    def kill_node(self, node: RayNode, sig: int = signal.SIGKILL) -> None:
        """Signal every process of one node at once: its process group (the raylet, its agents) and
        the workers the raylet started, which Ray puts in process groups of their own."""
        for pid in node_processes(node.pgid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig == signal.SIGKILL:
            node.stopped = True

    def stop(self) -> None:
        """Kill every process this cluster started (workers first, the head last), then its files."""
        for node in reversed(self.nodes):
            if not node.stopped:
                self.kill_node(node)
        time.sleep(0.2)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
