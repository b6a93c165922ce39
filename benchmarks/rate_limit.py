"""Goodput under a hidden provider capacity: our gateway's limiter beside a fixed 50 with naive retries.

A simulated provider (in process, on a virtual clock, so ten simulated minutes take seconds and every
run gives the same figures) hides its capacity. Three scenarios:

* ``concurrency``: at most 20 requests in flight, 0.5 s each (capacity 40 calls/s); above it a 429 with
  ``retry-after: 1``; no rate-limit headers.
* ``rpm``: 1,200 requests per sliding minute (20 calls/s); it sends ``x-ratelimit-*`` headers like
  OpenAI, and — as OpenAI documents — refused requests count against the limit too.
* ``cap5``: at most 5 requests in flight, 1 s each (capacity 5 calls/s); above it a 429 with
  ``retry-after: 1`` and ``x-ratelimit-*`` headers that show room left (the cap is not a window).
  Here 100 agents of 20 calls each make one run: it completes when every agent has made its calls,
  and goodput is the calls made over the run's time, as a share of the capacity (goal ≥ 80 %).

In the first two, 300 closed-loop callers (sessions) offer more load than the capacity. Ours:
``Gateway`` with its defaults (baseline 50, the adaptive rule, retry budget, retry-after cooldowns,
the provider's windows read from its headers, a concurrency cap learned from 429s with room left).
Baseline: a fixed semaphore of 50 that retries a 429 after 0.1 s, up to 5 times, ignoring
retry-after (the naive client). Goodput = successful calls per second, as a share of the hidden
capacity; the 429 rate = refused attempts / attempts. Both are measured after the first
``--warmup`` seconds (the first windows) and over the whole run.

    python benchmarks/rate_limit.py [--seconds 600] [--warmup 120] [--callers 300] [--real]

``--real`` adds ``cap5`` as a real run: ``deploy`` of 100 agents over loopback HTTP against the
simulated provider (``agent_fleet.testing``) capped at 5 concurrent requests of 0.5 s, which answers
429 with ``x-ratelimit-*`` headers and ``retry-after``; beside it, the naive client (50 at once, a 429
retried after 0.1 s up to 5 times, then again after 1 s) makes as many calls to a fresh provider with
the same cap.

Goals: ≥ 90 % of the hidden capacity as goodput with < 5 % 429s after the first windows (the first
two); the 100-agent run completes at ≥ 80 % of the capacity (``cap5``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import FleetError, RateLimited
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import RateSignals

REQUEST = ChatRequest(model="sim", messages=[{"role": "user", "content": "x" * 600}], max_tokens=200)


@dataclass
class Stats:
    ok: list[float] = field(default_factory=list)  # completion times of successful calls
    attempts: list[tuple[float, bool]] = field(default_factory=list)  # (time, refused)


class HiddenCapacity:
    """A provider that refuses with 429 above a capacity it does not announce (ModelProvider port)."""

    name = "sim"
    model = "sim"

    def __init__(
        self,
        clock: VirtualClock,
        stats: Stats,
        *,
        max_concurrency: int | None = None,
        rpm: int | None = None,
        latency: Callable[[], float],
        headers: bool = False,
    ) -> None:
        self.clock = clock
        self.stats = stats
        self.max_concurrency = max_concurrency
        self.rpm = rpm
        self.latency = latency
        self.headers = headers
        self.in_flight = 0
        self.window: deque[float] = deque()
        self.on_signals: Callable[[str, RateSignals], None] | None = None

    def _window(self, now: float) -> int:
        while self.window and self.window[0] <= now - 60.0:
            self.window.popleft()
        return len(self.window)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        now = self.clock.now()
        refused: RateLimited | None = None
        if self.max_concurrency is not None and self.in_flight >= self.max_concurrency:
            refused = RateLimited("sim answered 429 (concurrency)", status=429, retry_after=1.0)
        if self.rpm is not None:
            used = self._window(now)
            self.window.append(now)  # refused requests count against the limit too
            if refused is None and used >= self.rpm:
                wait = max(0.0, self.window[0] + 60.0 - now)
                refused = RateLimited("sim answered 429 (rpm)", status=429, retry_after=math.ceil(wait))
        if self.headers and self.on_signals is not None and self.rpm is not None:
            used = self._window(now)
            self.on_signals(
                request.model,
                RateSignals(limit_requests=self.rpm, remaining_requests=max(0, self.rpm - used), reset_requests=60.0),
            )
        elif self.headers and self.on_signals is not None:  # nominal windows, far from used up
            self.on_signals(
                request.model, RateSignals(limit_requests=10_000, remaining_requests=9_999, reset_requests=0.006)
            )
        self.stats.attempts.append((now, refused is not None))
        if refused is not None:
            await self.clock.sleep(0.01)
            raise refused
        self.in_flight += 1
        try:
            await self.clock.sleep(self.latency())
        finally:
            self.in_flight -= 1
        self.stats.ok.append(self.clock.now())
        return ChatResponse(content="ok", usage=Usage(200, 50), model="sim")

    async def aclose(self) -> None:
        return None


class NaiveClient:
    """A fixed 50 concurrent calls; a 429 is retried after 0.1 s, up to 5 times, retry-after ignored."""

    def __init__(self, provider: HiddenCapacity, clock: VirtualClock) -> None:
        self.provider = provider
        self.clock = clock
        self.sem = asyncio.Semaphore(50)

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        async with self.sem:
            for attempt in range(6):
                try:
                    return await self.provider.complete(request)
                except RateLimited:
                    if attempt == 5:
                        raise
                    await self.clock.sleep(0.1)
        raise AssertionError("unreachable")


async def drive(clock: VirtualClock, seconds: float) -> None:
    """Advance the virtual clock deadline by deadline, letting every task run between steps."""
    end = clock.now() + seconds
    while True:
        for _ in range(40):
            await asyncio.sleep(0)
        nxt = clock.next_deadline()
        if nxt is None or nxt > end:
            clock.set(end)
            return
        clock.set(nxt)


async def agent_run(client_kind: str, *, agents: int = 100, calls: int = 20) -> tuple[Stats, float, float, int]:
    """``cap5``: one run of ``agents`` agents making ``calls`` calls each (a failed call is retried by
    the agent after 1 s, as dispatch retries an attempt). Returns (stats, capacity, run time, failures)."""
    clock = VirtualClock()
    stats = Stats()
    rng = random.Random(7)
    provider = HiddenCapacity(
        clock, stats, max_concurrency=5, latency=lambda: rng.lognormvariate(math.log(1.0), 0.2), headers=True
    )
    client: Gateway | NaiveClient
    client = (
        Gateway(provider, clock=clock, session_tokens=None) if client_kind == "ours" else NaiveClient(provider, clock)
    )
    failures = 0

    async def agent(i: int) -> None:
        nonlocal failures
        done = 0
        while done < calls:
            try:
                await client.complete(f"a{i}", REQUEST)
                done += 1
            except FleetError:
                failures += 1
                await clock.sleep(1.0)

    async def whole() -> float:
        await asyncio.gather(*(agent(i) for i in range(agents)))
        return clock.now()

    task = asyncio.create_task(whole())
    while not task.done():
        await drive(clock, 60.0)
    return stats, 5 / 1.0, task.result(), failures


async def run(scenario: str, client_kind: str, *, seconds: float, callers: int) -> tuple[Stats, float]:
    clock = VirtualClock()
    stats = Stats()
    rng = random.Random(42)
    if scenario == "concurrency":
        provider = HiddenCapacity(clock, stats, max_concurrency=20, latency=lambda: 0.5)
        capacity = 20 / 0.5
    else:
        provider = HiddenCapacity(
            clock, stats, rpm=1_200, latency=lambda: rng.lognormvariate(math.log(1.0), 0.3), headers=True
        )
        capacity = 1_200 / 60
    client: Gateway | NaiveClient
    if client_kind == "ours":
        client = Gateway(provider, clock=clock, session_tokens=None)
    else:
        client = NaiveClient(provider, clock)
    stop = False

    async def caller(i: int) -> None:
        while not stop:
            try:
                await client.complete(f"s{i}", REQUEST)
            except FleetError:
                await clock.sleep(0.1)

    tasks = [asyncio.create_task(caller(i)) for i in range(callers)]
    await drive(clock, seconds)
    stop = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return stats, capacity


def figures(stats: Stats, capacity: float, start: float, end: float) -> tuple[float, float]:
    ok = sum(1 for t in stats.ok if start <= t < end)
    tried = [refused for t, refused in stats.attempts if start <= t < end]
    goodput = ok / (end - start) / capacity
    rate_429 = sum(tried) / len(tried) if tried else 0.0
    return goodput, rate_429


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0, help="simulated seconds per run")
    parser.add_argument("--warmup", type=float, default=120.0, help="first seconds left out of 'steady'")
    parser.add_argument("--callers", type=int, default=300)
    parser.add_argument("--real", action="store_true", help="also cap5 as a real 100-agent run over HTTP")
    args = parser.parse_args()
    print(f"hidden capacity, {args.callers} closed-loop callers, {args.seconds:.0f} simulated s per run\n")
    cols = (("goodput steady", 14), ("429s steady", 12), ("goodput all", 12), ("429s all", 9))
    header = f"{'scenario':<12} {'client':<24} " + " ".join(f"{c:>{w}}" for c, w in cols)
    print(header)
    print("-" * len(header))
    verdicts = []
    for scenario in ("concurrency", "rpm"):
        rows = {}
        for kind, label in (("ours", "ours (adaptive)"), ("naive", "fixed 50, naive retries")):
            stats, capacity = await run(scenario, kind, seconds=args.seconds, callers=args.callers)
            steady = figures(stats, capacity, args.warmup, args.seconds)
            whole = figures(stats, capacity, 0.0, args.seconds)
            rows[kind] = steady
            print(
                f"{scenario:<12} {label:<24} {steady[0]:>14.1%} {steady[1]:>12.1%} {whole[0]:>12.1%} {whole[1]:>9.1%}"
            )
        ours, naive = rows["ours"], rows["naive"]
        ratio = ours[0] / naive[0] if naive[0] else float("inf")
        met = ours[0] >= 0.90 and ours[1] < 0.05
        verdicts.append(met)
        print(
            f"{'':<12} goodput ours/naive = {ratio:.2f}×; 429s ours {ours[1]:.1%} vs naive {naive[1]:.1%}; "
            f"goal (≥ 90 % goodput, < 5 % 429s) {'met' if met else 'NOT met'}\n"
        )
    verdicts.append(await cap5_report())
    if args.real:
        verdicts.append(await real_cap5_report())
    raise SystemExit(0 if all(verdicts) else 1)


async def cap5_report() -> bool:
    """The ``cap5`` scenario: a 100-agent run through ours and through the naive client."""
    rows = {}
    for kind, label in (("ours", "ours (adaptive)"), ("naive", "fixed 50, naive retries")):
        stats, capacity, took, failures = await agent_run(kind)
        ok = len(stats.ok)
        refused = sum(1 for _, r in stats.attempts if r) / len(stats.attempts)
        rows[kind] = goodput = ok / took / capacity
        print(
            f"{'cap5':<12} {label:<24} {goodput:>14.1%} {refused:>12.1%}   run of 100 agents: {took:7.1f} s, "
            f"{ok} calls, {failures} failed calls retried by agents"
        )
    ratio = rows["ours"] / rows["naive"] if rows["naive"] else float("inf")
    met = rows["ours"] >= 0.80
    print(f"{'':<12} goodput ours/naive = {ratio:.2f}×; goal (≥ 80 % of capacity) {'met' if met else 'NOT met'}\n")
    return met


REAL_LATENCY = 0.5


async def naive_http(base_url: str, calls: int) -> tuple[int, int, float]:
    """The naive client over HTTP: 50 at once, a 429 retried after 0.1 s up to 5 times, retry-after
    ignored; a call that still failed is made again after 1 s. Returns (ok, refused attempts, seconds)."""
    import time

    import aiohttp

    body = {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": "Review:\nitem"}], "max_tokens": 50}
    sem = asyncio.Semaphore(50)
    ok = refused = 0
    began = time.monotonic()
    async with aiohttp.ClientSession(headers={"authorization": "Bearer sk-bench"}) as http:

        async def one() -> None:
            nonlocal ok, refused
            while True:  # a call that failed for good is made again after 1 s, as an agent would
                async with sem:
                    for _ in range(6):
                        async with http.post(f"{base_url}/chat/completions", json=body) as r:
                            await r.read()
                            if r.status == 200:
                                ok += 1
                                return
                            refused += 1
                        await asyncio.sleep(0.1)
                await asyncio.sleep(1.0)

        await asyncio.gather(*(one() for _ in range(calls)))
    return ok, refused, time.monotonic() - began


async def real_cap5_report() -> bool:
    """cap5 as a real run: 100 agents through ``deploy`` (engine, gateway, HTTP) against the simulated
    provider capped at 5, then the naive client against a fresh one, the same number of calls."""
    import json
    import tempfile
    import time
    from pathlib import Path

    from agent_fleet.engine import RunOptions, deploy
    from agent_fleet.sim.provider import SimConfig, SimProvider

    capacity = 5 / REAL_LATENCY
    config = SimConfig(latency=REAL_LATENCY, max_concurrency=5, seed=11)
    with tempfile.TemporaryDirectory() as tmp:
        items = Path(tmp) / "items.txt"
        items.write_text("".join(f"https://example.org/page-{i}\n" for i in range(100)))
        cfg = Path(tmp) / "fleet.yaml"
        cfg.write_text("verification: {fraction: 0, minimum: 0}\n")
        async with SimProvider(config) as sim:
            options = RunOptions(
                task="Check each page for broken links",
                input_path=str(items),
                agents=100,
                provider=sim.base_url,
                out_dir=str(Path(tmp) / "out"),
                config_path=str(cfg),
                embedder="lexical",
            )
            began = time.monotonic()
            report = await deploy(options, store_url=f"sqlite:///{tmp}/fleet.db", api_key="sk-bench")
            took = time.monotonic() - began
            served = sim.stats()
        calls = int(report.summary["llm_calls"])
        refused = sum(int(by.get("429", 0)) for by in served["requests"].values())
        async with SimProvider(config) as fresh:
            n_ok, n_refused, n_took = await naive_http(fresh.base_url, calls)
    ours = calls / took / capacity
    naive = n_ok / n_took / capacity
    done = report.summary["sessions"]
    print(
        f"{'cap5 (HTTP)':<12} {'ours (engine, deploy)':<24} {ours:>14.1%} {refused / (calls + refused):>12.1%}"
        f"   100 agents: {json.dumps(done)}, {calls} calls in {took:.1f} s, status {report.status}"
    )
    print(
        f"{'cap5 (HTTP)':<12} {'fixed 50, naive retries':<24} {naive:>14.1%} {n_refused / (n_ok + n_refused):>12.1%}"
        f"   {n_ok} of {calls} calls in {n_took:.1f} s"
    )
    met = report.status == "completed" and ours >= 0.80
    ratio = ours / naive if naive else float("inf")
    verdict = "met" if met else "NOT met"
    print(f"{'':<12} goodput ours/naive = {ratio:.2f}×; goal (run completes, ≥ 80 % of capacity) {verdict}")
    return met


if __name__ == "__main__":
    asyncio.run(main())
