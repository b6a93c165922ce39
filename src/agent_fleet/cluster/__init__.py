"""Ray, in one package: harnesses run on the nodes of a Ray cluster (``dispatch.executor: ray:auto`` or
``ray://HOST:PORT``, ``deploy --executor``).

:mod:`~agent_fleet.cluster.executor` is the engine's side (it connects to the cluster, starts one node
worker per node, serves the run's gateway to the nodes and gives the dispatcher its pool and session
body); :mod:`~agent_fleet.cluster.node` is what runs on each node; :mod:`~agent_fleet.cluster.workers`
is the dispatcher's side (the node workers as workers of its pool, plain data). Only ``executor``
imports Ray. The local Ray cluster tests and benchmarks start is a test helper,
:mod:`agent_fleet.testing.ray_cluster`.
"""

from __future__ import annotations

from agent_fleet.errors import ConfigError

__all__ = ["check_store"]


def check_store(executor: str | None, store_url: str) -> None:
    """A Ray executor's nodes share the session log: it must be PostgreSQL (ConfigError, exit 2, before
    anything is recorded)."""
    if executor not in (None, "local") and not store_url.startswith(("postgresql:", "postgres:")):
        raise ConfigError("the Ray executor needs the session log in PostgreSQL (--store postgresql://...)")
