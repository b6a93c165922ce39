"""Throughput of the simulated provider at zero latency, against a bare aiohttp server.

Goal: the simulated provider must not be the bottleneck of load tests (aim: at least 2,000 small chat
completions per second on one core). Each server runs in its own single-threaded process; the same
keep-alive aiohttp client drives each in turn. Besides wall-clock requests/s (which depends on the client
and on whatever else the machine runs), the script reads the server process's CPU time from /proc and
reports the capacity of one core: requests per CPU-second of the server. Baseline: a bare aiohttp server
answering the same POST with a fixed JSON body, measured in the same run.

    python benchmarks/bench_sim_provider.py [--seconds 4] [--concurrency 32] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import aiohttp

from agent_fleet.sim.settings import SimConfig

_BARE_SERVER = r"""
import sys
from aiohttp import web
BODY = b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}'
async def handle(request):
    await request.read()
    return web.Response(body=BODY, content_type="application/json")
async def main():
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}/v1", flush=True)
    import asyncio
    await asyncio.Event().wait()
import asyncio
asyncio.run(main())
"""

PLAIN = {"model": "sim-small", "messages": [{"role": "user", "content": "Say hello to the fleet."}]}
TOOLS = [
    {"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("submit_result", "finish")
]
AGENT_TURN = {
    "model": "sim-small",
    "messages": [
        {"role": "system", "content": "You are one agent of a fleet."},
        {"role": "user", "content": "Task: classify\n\nItems:\nthe app crashes on start\nplease add dark mode"},
    ],
    "tools": TOOLS,
}


@contextlib.contextmanager
def server(kind: str) -> Iterator[tuple[str, int]]:
    """A server process; yields its base URL and pid."""
    if kind == "bare":
        cmd = [sys.executable, "-c", _BARE_SERVER]
    else:
        config = json.dumps(SimConfig().to_json())
        cmd = [sys.executable, "-m", "agent_fleet.sim.provider", "--port", "0", "--config-json", config]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip(), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(
    base_url: str, pid: int, body: dict[str, object], seconds: float, concurrency: int
) -> tuple[float, float]:
    """(wall-clock requests/s, requests per CPU-second of the server)."""
    payload = json.dumps(body).encode()
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}
    url = base_url + "/chat/completions"
    done = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(50):  # warm up connections and caches
            async with session.post(url, data=payload, headers=headers) as resp:
                await resp.read()
        end = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < end:
                async with session.post(url, data=payload, headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"unexpected status {resp.status}")
                done += 1

        cpu_before = cpu_seconds(pid)
        start = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker())
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu_before
    return done / elapsed, done / max(cpu, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cases = (("bare", "baseline: bare aiohttp, fixed JSON", PLAIN), ("sim", "sim: plain chat completion", PLAIN))
    cases += (("sim", "sim: agent turn with tools", AGENT_TURN),)
    best: dict[str, tuple[float, float]] = {}
    # Rounds interleave the servers so that load from other processes hits them alike; best round counts.
    for _ in range(args.rounds):
        for kind, label, body in cases:
            with server(kind) as (url, pid):
                wall, per_core = asyncio.run(drive(url, pid, body, args.seconds, args.concurrency))
            old = best.get(label, (0.0, 0.0))
            best[label] = (max(old[0], wall), max(old[1], per_core))
    base_wall, base_core = best[cases[0][1]]
    for _, label, _ in cases:
        wall, core = best[label]
        print(
            f"{label:<38} {wall:>8,.0f} req/s wall  {core:>8,.0f} req/s per server core"
            f"  ratio {core / base_core:.2f} (per core) {wall / base_wall:.2f} (wall)"
        )


if __name__ == "__main__":
    main()
