"""No counter leaks over real HTTP: timeouts, dropped connections, 5xx and cancellations.

The gateway talks to the simulated provider on loopback; afterwards nothing is in flight, nothing is
reserved and every permit is back.
"""

from __future__ import annotations

import asyncio
import random

from agent_fleet.domain.model import ChatRequest
from agent_fleet.errors import FleetError
from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.model_breaker import BreakerConfig
from agent_fleet.spend.providers import OpenAIProvider
from agent_fleet.spend.retry import RetryPolicy

KEY = "sk-leak-test-SECRET"


async def test_no_leak_over_http_with_timeouts_drops_5xx_and_cancellations() -> None:
    config = SimConfig(latency=0.01, rate_500=0.05, rate_503=0.05, rate_stall=0.07, stall_seconds=1.0, stall_drop=0.5)
    rng = random.Random(3)
    async with SimProvider(config) as sim:
        provider = OpenAIProvider(api_key=KEY, base_url=sim.base_url, model="gpt-4.1-mini", timeout=0.4)
        gw = Gateway(
            provider,
            concurrency=50,
            timeout_s=0.4,  # how long the server may stay silent (the watched provider has no limit of its own)
            session_tokens=None,
            retry=RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.05),
            breaker=BreakerConfig(min_calls=100_000),
            adaptive=False,
        )
        request = ChatRequest(model="", messages=[{"role": "user", "content": "Task: say hi"}], max_tokens=50)
        errors: list[str] = []

        async def one(i: int) -> None:
            try:
                await gw.complete(f"s{i % 40}", request)
            except FleetError as exc:
                errors.append(str(exc))

        # A first answer gives the model its pace: from then on a call that is not streamed may wait its
        # silence plus its answer's time at that pace, so the stalls below outlast it and time out.
        while gw.statistics().run["llm_calls"] == 0:
            await one(-1)
        tasks = [asyncio.create_task(one(i)) for i in range(500)]
        for task in rng.sample(tasks, 60):
            await asyncio.sleep(rng.uniform(0, 0.01))
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
        await gw.aclose()
    assert cancelled > 5 and len(errors) > 15  # some cancellations land mid-call, some errors happen
    stats = gw.statistics()
    assert stats.in_flight == 0
    assert (stats.reserved_tokens, stats.reserved_usd, stats.open_reservations) == (0, 0, 0)
    assert stats.concurrency.borrowed_tokens == 0 and stats.concurrency.tasks_waiting == 0
    assert stats.run["errors"]["timeout"] > 0 and stats.run["errors"]["server"] > 0
    assert all(KEY not in e for e in errors)
