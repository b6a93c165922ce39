"""The simulated model provider: an offline OpenAI- and Anthropic-compatible server.

In process::

    async with SimProvider(SimConfig(latency=0.05)) as sim:
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sk-test")

In its own process (for benchmarks and tests whose client must not share the server's event loop)::

    with sim_provider_process(SimConfig(rpm=600)) as base_url:
        ...

From a shell: ``python -m agent_fleet.sim.provider --port 8000`` or ``agent-fleet sim-provider``;
either prints the base URL on one line, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agent_fleet.errors import FleetError
from agent_fleet.sim.event_loop import precise_event_loop
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.settings import (
    FixedLatency,
    LatencyModel,
    LogNormalLatency,
    SimConfig,
    SimConfigError,
    UniformLatency,
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
    "main",
    "serve",
    "sim_provider_process",
]


class SimProviderStartError(FleetError):
    """The simulated provider process did not come up."""


def build_config(
    *,
    latency: float | None = None,
    latency_median: float | None = None,
    latency_sigma: float = 0.0,
    **settings: Any,
) -> SimConfig:
    """A config from flat command-line style settings (``None`` values are left at their defaults)."""
    model: float | LatencyModel = 0.0
    if latency_median is not None:
        model = LogNormalLatency(median=latency_median, sigma=latency_sigma) if latency_sigma > 0 else latency_median
    elif latency is not None:
        model = latency
    return SimConfig(latency=model, **{k: v for k, v in settings.items() if v is not None})


async def serve(
    config: SimConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve until SIGINT/SIGTERM (or cancellation); ``announce`` gets the base URL once listening.
    Run it with :func:`run_server` for timers that keep the drawn latencies to a fraction of a ms."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        sim = SimProvider(config)
        await sim.start(host, port)
        try:
            announce(sim.base_url)
            await stop.wait()
        finally:
            await sim.stop()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def run_server(
    config: SimConfig, *, host: str = "127.0.0.1", port: int = 0, announce: Callable[[str], None] = print
) -> None:
    """Serve in this thread on a timer-precise event loop (see :mod:`sim_loop`) until interrupted."""
    with asyncio.Runner(loop_factory=precise_event_loop) as runner:
        runner.run(serve(config, host=host, port=port, announce=announce))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agent_fleet.sim.provider", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--config-json", help="a whole SimConfig as JSON (other flags override it)")
    p.add_argument("--latency", type=float)
    p.add_argument("--latency-median", type=float)
    p.add_argument("--latency-sigma", type=float, default=0.0)
    p.add_argument("--per-output-token-s", type=float)
    for name in ("429", "500", "503", "529", "stall"):
        p.add_argument(f"--rate-{name}", type=float)
    p.add_argument("--stall-seconds", type=float)
    p.add_argument("--stall-drop", type=float)
    p.add_argument("--max-concurrency", type=int)
    p.add_argument("--rpm", type=int)
    p.add_argument("--tpm", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--insufficient-quota", action="store_true", default=None)
    p.add_argument("--verifier-refute-pct", type=float)
    p.add_argument("--edits", action="store_true", default=None)
    return p


def _config_from_namespace(ns: argparse.Namespace) -> SimConfig:
    flags = {k: v for k, v in vars(ns).items() if k not in ("host", "port", "config_json")}
    if ns.config_json:
        base = SimConfig.from_json(json.loads(ns.config_json)).to_json()
        latency_flags = ("latency", "latency_median", "latency_sigma")
        overrides = {k: v for k, v in flags.items() if v is not None and k not in latency_flags}
        if ns.latency is not None or ns.latency_median is not None:
            base["latency"] = build_config(
                latency=ns.latency, latency_median=ns.latency_median, latency_sigma=ns.latency_sigma
            ).to_json()["latency"]
        base.update(overrides)
        return SimConfig.from_json(base)
    return build_config(**flags)


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        config = _config_from_namespace(ns)
    except (FleetError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def announce(url: str) -> None:
        print(url, flush=True)

    try:
        run_server(config, host=ns.host, port=ns.port, announce=announce)
    except OSError as exc:
        print(f"error: cannot listen on {ns.host}:{ns.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _wait_ready(root_url: str, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(root_url + "/sim/stats", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.02)


@contextlib.contextmanager
def sim_provider_process(
    config: SimConfig | None = None,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    startup_timeout: float = 30.0,
) -> Iterator[str]:
    """Run the simulated provider in its own Python process; yields its base URL (ending in ``/v1``)."""
    cfg = config or SimConfig()
    cmd = [
        sys.executable,
        "-m",
        "agent_fleet.sim.provider",
        "--host",
        host,
        "--port",
        str(port),
        "--config-json",
        json.dumps(cfg.to_json()),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None  # stdout=PIPE was requested
        deadline = time.monotonic() + startup_timeout
        line = ""
        while not line:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                raise SimProviderStartError(f"the simulated provider process did not start (exit code {proc.poll()})")
            ready, _, _ = select.select([proc.stdout], [], [], min(remaining, 0.5))
            if ready:
                line = proc.stdout.readline().strip()
                if not line and proc.poll() is not None:
                    raise SimProviderStartError(f"the simulated provider process exited with code {proc.returncode}")
        base_url = line
        try:
            _wait_ready(base_url.removesuffix("/v1"), deadline)
        except (urllib.error.URLError, OSError) as exc:
            raise SimProviderStartError(f"the simulated provider at {base_url} never answered: {exc}") from exc
        yield base_url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
