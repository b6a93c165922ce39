"""The Ray executor: harnesses run on the nodes of a Ray cluster (``dispatch.executor: ray:auto`` or
``ray://HOST:PORT``, ``deploy --executor``).

:mod:`~agent_fleet.cluster.executor` is the engine's side (it connects to the cluster, starts one node
worker per node, serves the run's gateway to the nodes and gives the dispatcher its pool and session
body); :mod:`~agent_fleet.cluster.node` is what runs on each node. The dispatcher's side is
:mod:`agent_fleet.dispatch.ray_workers`. Like the engine, this package wires implementations together.
"""

from __future__ import annotations

__all__: list[str] = []
