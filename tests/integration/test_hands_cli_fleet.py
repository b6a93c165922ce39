"""A fleet of 50 scripted CLI agents through a metering model endpoint: usage is metered per
session (one token each), matches what each CLI reports, and budgets stop the sessions that hit
them. (The end-to-end version through the real gateway and dispatcher lives with the engine.)"""

from __future__ import annotations

import asyncio
import os
import secrets

import pytest
from _hands_support import have_bwrap, owner_pids, sandbox_root
from _stub_gateway import stub_gateway

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.hands.cli_agents import CliAgentSpec, CliOutcome, GatewayAccess, run_cli_agent
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.testing.cli_standins import standin_command

pytestmark = pytest.mark.skipif(
    not have_bwrap() and os.geteuid() == 0,
    reason="without bubblewrap, root drops sandboxes to nobody, who cannot run this Python",
)


async def test_fifty_cli_agents_metered_per_session_and_stopped_by_budgets() -> None:
    n, calls, concurrency = 50, 3, 10
    budgeted = set(range(0, n, 5))  # every fifth session gets a budget its first call spends
    spec = CliAgentSpec(command=standin_command("codex", f"--calls {calls}"), format="codex", timeout=120)
    with sandbox_root() as root:
        provider = LocalSandboxProvider(SandboxConfig(root=root))
        async with stub_gateway() as gw:
            tokens = [f"gw-{i:02d}-{secrets.token_hex(6)}" for i in range(n)]
            for i in budgeted:
                gw.budgets[tokens[i]] = 1
            gate = asyncio.Semaphore(concurrency)
            outcomes: dict[int, CliOutcome] = {}

            async def one(i: int) -> None:
                part = Partition(
                    id=f"p{i:04d}", index=i, kind=InputKind.LIST, items=(f"item-{i}",), item_ids=(i,), est_tokens=10
                )
                access = GatewayAccess(openai_base_url=f"{gw.url}/v1", anthropic_base_url=gw.url, token=tokens[i])
                async with gate:
                    outcomes[i] = await run_cli_agent(
                        spec, provider=provider, session_id=f"run-f.s{i:05d}", partition=part, task="t", gateway=access
                    )

            async with asyncio.TaskGroup() as tg:
                for i in range(n):
                    tg.create_task(one(i))
        assert os.listdir(root) == []
        assert owner_pids(provider.owner) == []
    assert gw.seen_keys == set(tokens)
    for i, out in sorted(outcomes.items()):
        tok = tokens[i]
        assert out.usage.total_tokens == gw.used[tok] > 0  # CLI-reported usage == metered, per session
        if i in budgeted:
            assert gw.calls[tok] == 1 and gw.refused[tok] == 1 and not out.ok
        else:
            assert gw.calls[tok] == calls and gw.refused[tok] == 0 and out.ok
            assert [item.location for item in out.items] == [f"item-{i}"]
    assert sum(1 for o in outcomes.values() if o.ok) == n - len(budgeted)
