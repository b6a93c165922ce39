"""A harness on another machine calls the one gateway service (spend.gateway_client): the built-in harness
runs sessions through :class:`RemoteGateway` over loopback HTTP; the gateway meters and budgets them
exactly as in-process calls, and a budget refusal pauses the session with its scope."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal

import httpx
import pytest

from agent_fleet.brain.harness import Harness
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.outcomes import Outcome
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted
from agent_fleet.session.memory import MemorySessionLog
from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.gateway_client import GatewayClient
from agent_fleet.spend.providers import OpenAIProvider
from agent_fleet.spend.service import GatewayService
from agent_fleet.testing.fakes import FakeHands

RUN = "run-0000000000cd"


@pytest.fixture
async def service() -> AsyncIterator[GatewayService]:
    async with SimProvider(SimConfig()) as sim:
        provider = OpenAIProvider(api_key="sk-provider-SECRET", base_url=sim.base_url, model="gpt-4.1-mini")
        gateway = Gateway(provider, session_tokens=50_000)
        service = GatewayService(gateway)
        await service.start()
        try:
            yield service
        finally:
            await service.aclose()
            await gateway.aclose()


async def _session(log: MemorySessionLog, n: int) -> str:
    sid = f"{RUN}.s{n:05d}"
    partition = Partition(id=f"p{n}", index=n, kind=InputKind.LIST, items=(f"item {n}",), item_ids=(n,), est_tokens=10)
    created = {"run_id": RUN, "index": n, "partition_id": partition.id, "partition": partition.to_dict()}
    created.update(task="Classify", input_root=None, model="gpt-4.1-mini", max_tokens=256)
    await log.emit_event(sid, EventType.SESSION_CREATED, created)
    return sid


async def test_remote_harness_sessions_are_metered_by_the_one_gateway(service: GatewayService) -> None:
    log = MemorySessionLog()
    await log.open()
    client = GatewayClient(service.root_url)
    try:
        sids = [await _session(log, n) for n in range(5)]
        for sid in sids:
            remote = client.session(service.tokens.issue(sid, harness=True))
            brain = Harness(log=log, gateway=remote, hands=FakeHands())
            outcome = await brain.run(sid)
            assert outcome.outcome is Outcome.COMPLETED
        logged = Decimal(0)
        tokens = 0
        for sid in sids:
            for ev in await log.get_events(sid):
                if ev.type == EventType.MODEL_RESPONSE:
                    logged += Decimal(ev.data["response"]["cost_usd"])
                    tokens += Usage.from_dict(ev.data["response"]["usage"]).total_tokens
        run = service.gateway.meter.run
        assert run.calls >= 10 and tokens == run.total_tokens and logged == run.cost_usd > 0
    finally:
        await client.aclose()
        await log.close()


async def test_a_budget_refusal_reaches_the_remote_harness_with_its_scope(service: GatewayService) -> None:
    log = MemorySessionLog()
    await log.open()
    client = GatewayClient(service.root_url)
    try:
        sid = await _session(log, 1)
        service.gateway.set_session_budget(sid, tokens=10)
        remote = client.session(service.tokens.issue(sid, harness=True))
        request = ChatRequest(model="gpt-4.1-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=64)
        await remote.complete(sid, request)  # a bounded budget lets one call cross the cap, no more
        with pytest.raises(BudgetExhausted) as refused:
            await remote.complete(sid, request)
        assert refused.value.scope == "session"
        outcome = await Harness(log=log, gateway=remote, hands=FakeHands()).run(sid)
        assert (outcome.outcome, outcome.reason) == (Outcome.PAUSED, "budget")
        paused = [e.data for e in await log.get_events(sid) if e.type == EventType.SESSION_PAUSED]
        assert paused[-1]["scope"] == "session"
        assert service.gateway.meter.run.calls == 1  # nothing more reached the provider
    finally:
        await client.aclose()
        await log.close()


async def test_only_a_harness_token_restores_what_a_session_spent(service: GatewayService) -> None:
    sid = f"{RUN}.s00009"
    doc = json.dumps({"usage": Usage(900, 100).to_dict(), "cost_usd": "0.25"})
    async with httpx.AsyncClient(base_url=service.root_url) as http:
        plain = service.tokens.issue(sid)  # what a CLI agent holds
        refused = await http.post("/fleet/spent", content=doc, headers={"authorization": f"Bearer {plain}"})
        assert refused.status_code == 401
        assert service.gateway.meter.session(sid).total_tokens == 0
        harness = service.tokens.issue(sid, harness=True)
        assert harness.startswith("fgh-") and service.tokens.verify(harness) == sid
        assert service.tokens.verify(plain, harness=True) is None
        forged = "fgh-" + plain[4:]  # a session token's MAC does not make a harness token
        assert service.tokens.verify(forged) is None
        bad = await http.post("/fleet/spent", content=b"{}", headers={"authorization": f"Bearer {harness}"})
        assert bad.status_code == 400
    client = GatewayClient(service.root_url)
    try:
        remote = client.session(harness)
        remote.restore_spent(sid, Usage(900, 100), Decimal("0.25"))
        request = ChatRequest(model="gpt-4.1-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=64)
        response = await remote.complete(sid, request)  # the restore goes first, then the call
        tally = service.gateway.meter.session(sid)
        assert tally.total_tokens == 1000 + response.usage.total_tokens
        assert tally.cost_usd == Decimal("0.25") + (response.cost_usd or 0)
    finally:
        await client.aclose()
