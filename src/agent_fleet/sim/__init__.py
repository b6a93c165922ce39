"""The simulated model provider: an offline OpenAI- and Anthropic-compatible server behind
``agent-fleet demo`` and ``agent-fleet sim-provider``.

The content of every answer is a pure function of the request; latency, rate limits, injected
errors and stalls are configured by :class:`SimConfig`.

* :mod:`~agent_fleet.sim.provider`: :class:`SimProvider` in process, ``sim_provider_process`` in its
  own process, the command line;
* :mod:`~agent_fleet.sim.http_server`: the aiohttp server and its order of checks;
* :mod:`~agent_fleet.sim.settings`: :class:`SimConfig` and the latency models;
* :mod:`~agent_fleet.sim.rate_limits`: the hidden capacity, rate-limit headers, prompt cache;
* :mod:`~agent_fleet.sim.behaviour` (with ``conversation``, ``items``, ``coding``, ``detectors``,
  ``fixes``): what the simulated model answers;
* :mod:`~agent_fleet.sim.wire` (with ``wire_openai``, ``wire_anthropic``, ``wire_responses``): the
  wire formats; ``window``: context-window overflow; ``embed``: embeddings; ``event_loop``: a
  loop with sub-millisecond timers.

Names load on first use, so importing this package loads no HTTP server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports

if TYPE_CHECKING:
    from agent_fleet.sim.provider import (
        FixedLatency,
        LogNormalLatency,
        SimConfig,
        SimConfigError,
        SimProvider,
        SimProviderStartError,
        UniformLatency,
        build_config,
        run_server,
        serve,
        sim_provider_process,
    )

__all__ = [
    "FixedLatency",
    "LogNormalLatency",
    "SimConfig",
    "SimConfigError",
    "SimProvider",
    "SimProviderStartError",
    "UniformLatency",
    "build_config",
    "run_server",
    "serve",
    "sim_provider_process",
]

__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "agent_fleet.sim.provider"))
