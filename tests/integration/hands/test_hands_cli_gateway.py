"""A fleet of 50 scripted CLI agents through the real gateway service: each session gets its own
gateway token, usage and list-price cost are metered per session (and match what each CLI reports),
and budgets stop the sessions that hit them. Upstream is the simulated provider."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest
from _hands_support import have_bwrap, owner_pids, sandbox_root

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.hands.cli_agents import CliAgentSpec, CliOutcome, CommandAgent, GatewayAccess
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import AnthropicProvider, OpenAIProvider
from agent_fleet.spend.service import GatewayService
from agent_fleet.testing.cli_standins import standin_command

pytestmark = pytest.mark.skipif(
    not have_bwrap() and os.geteuid() == 0,
    reason="without bubblewrap, root drops sandboxes to nobody, who cannot run this Python",
)

PROVIDER_KEY = "sk-provider-secret-never-leaves-the-gateway"


@pytest.fixture
async def service() -> AsyncIterator[GatewayService]:
    async with SimProvider(SimConfig()) as sim:
        default = OpenAIProvider(api_key=PROVIDER_KEY, base_url=sim.base_url, model="gpt-4.1-mini")
        claude = AnthropicProvider(api_key=PROVIDER_KEY, base_url=sim.base_url, model="claude-sonnet-4-5")
        gateway = Gateway(default, routes={"claude-sonnet-4-5": claude}, session_tokens=200_000)
        svc = GatewayService(gateway)
        await svc.start()
        try:
            yield svc
        finally:
            await svc.aclose()
            await gateway.aclose()


async def test_fifty_cli_agents_through_the_gateway(service: GatewayService) -> None:
    n, calls, concurrency = 50, 3, 10
    budgeted = set(range(0, n, 5))
    specs = {
        "codex": CliAgentSpec(command=standin_command("codex", f"--calls {calls}"), format="codex", timeout=120),
        "claude": CliAgentSpec(
            command=standin_command("claude", f"--calls {calls}", "--model claude-sonnet-4-5"),
            format="claude",
            timeout=120,
        ),
    }
    gw = service.gateway
    outcomes: dict[str, CliOutcome] = {}
    with sandbox_root() as root:
        provider = LocalSandboxProvider(SandboxConfig(root=root))
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            sid = f"run-g.s{i:05d}"
            if i in budgeted:
                gw.set_session_budget(sid, tokens=0)  # reached before it starts: every call is refused
            access = GatewayAccess(
                openai_base_url=service.root_url + "/v1", anthropic_base_url=service.root_url, token=service.issue(sid)
            )
            part = Partition(
                id=f"p{i:04d}", index=i, kind=InputKind.LIST, items=(f"item-{i}",), item_ids=(i,), est_tokens=10
            )
            spec = specs["claude" if i % 5 == 1 else "codex"]
            async with gate:
                outcomes[sid] = await CommandAgent(spec, provider).run(
                    session_id=sid, partition=part, task="review", gateway=access
                )

        async with asyncio.TaskGroup() as tg:
            for i in range(n):
                tg.create_task(one(i))
        assert os.listdir(root) == []
        assert owner_pids(provider.owner) == []
    for i in range(n):
        sid = f"run-g.s{i:05d}"
        out, tally = outcomes[sid], gw.session_usage(sid)
        if i in budgeted:
            assert not out.ok and tally.calls == 0 and out.items == ()
            continue
        assert out.ok, (sid, out.error, out.stderr_tail)
        assert tally.calls == calls and tally.cost_usd > 0
        assert out.usage.input_tokens == tally.input_tokens  # what the CLI reports is what was metered
        assert out.usage.output_tokens == tally.output_tokens
        assert [item.location for item in out.items] == [f"item-{i}"]
    assert sum(o.ok for o in outcomes.values()) == n - len(budgeted)
