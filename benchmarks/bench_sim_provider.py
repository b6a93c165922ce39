"""Throughput of the simulated provider at zero latency, against a bare aiohttp server.

Goal: the simulated provider must not be the bottleneck of load tests (aim: at least 2,000 small chat
completions per second on one core). Both servers run in their own process (one core each at most); the
same keep-alive aiohttp client drives each for the same time. Baseline: a bare aiohttp server answering
the same POST with a fixed JSON body, so the ratio shows what the simulation itself costs.

    python benchmarks/bench_sim_provider.py [--seconds 5] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import aiohttp

from agent_fleet.testing.sim_provider import SimConfig, sim_provider_process

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
def bare_server() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-c", _BARE_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def drive(base_url: str, body: dict[str, object], seconds: float, concurrency: int) -> float:
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

        start = time.perf_counter()
        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker())
        elapsed = time.perf_counter() - start
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with bare_server() as url:
        baseline = asyncio.run(drive(url, PLAIN, args.seconds, args.concurrency))
    with sim_provider_process(SimConfig()) as url:
        plain = asyncio.run(drive(url, PLAIN, args.seconds, args.concurrency))
        agent = asyncio.run(drive(url, AGENT_TURN, args.seconds, args.concurrency))
    print(f"baseline (bare aiohttp server, fixed JSON): {baseline:,.0f} req/s")
    print(f"sim provider, plain chat completion:       {plain:,.0f} req/s  ratio {plain / baseline:.2f}")
    print(f"sim provider, agent turn with tools:       {agent:,.0f} req/s  ratio {agent / baseline:.2f}")


if __name__ == "__main__":
    main()
