"""Embeddings through the real gateway against the simulated provider over loopback: deduplication with
the provider embedder is metered and budget-stopped, and the gateway service's ``/v1/embeddings`` serves
the official OpenAI SDK under a session token."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import openai
import pytest

from agent_fleet.aggregate import Aggregator, choose_embedder
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import BudgetExhausted
from agent_fleet.sim.embed import embed as sim_embed
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.settings import SimConfig
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.spend.providers import AnthropicProvider, OpenAIProvider
from agent_fleet.spend.service import GatewayService

KEY = "sk-sim-embeddings-secret"
RATE = Decimal("0.02")
PRICES = PriceTable(overrides={"sim-embed": Rates(input=RATE, output=Decimal(0))})
SQL = "The login query concatenates the user name into the SQL statement without escaping it."
MD5 = "Passwords are stored as unsalted MD5 hashes in the accounts table."


def result(i: int, body: str) -> ResultItem:
    return ResultItem(id=f"r{i}", partition_id=f"p{i % 5}", session_id=f"run.s{i}", title=f"Finding {i}", body=body)


def embedding_requests(sim: SimProvider) -> int:
    return sum(sim.stats()["requests"].get("/v1/embeddings", {}).values())


def assert_quiet(gw: Gateway) -> None:
    s = gw.statistics()
    assert (s.in_flight, s.reserved_tokens, s.open_reservations) == (0, 0, 0)


async def test_dedup_with_the_provider_embedder_is_metered_through_the_gateway() -> None:
    async with SimProvider(SimConfig()) as sim:
        gw = Gateway(OpenAIProvider(api_key=KEY, base_url=sim.base_url), prices=PRICES, run_usd="1")
        try:
            emb = choose_embedder("provider", gateway=gw, model="sim-embed", session_id="run-1.embed")
            agg = Aggregator(emb)
            await agg.add(result(1, SQL))
            d = await agg.add(result(2, SQL.replace("escaping", "quoting")))
            await agg.add(result(3, MD5))
            assert d.leader_id == "r1" and d.similarity >= 0.95
            s = agg.stats()
            assert (s.raw, s.unique, s.embedded) == (3, 2, 3)
            sent = sim.stats()["tokens_in"]
            tally = gw.session_usage("run-1.embed")
            assert sent > 0 and tally.input_tokens == sent and tally.output_tokens == 0
            # a result alone is not embedded: the first waits for the second, and both go in one request
            assert tally.calls == embedding_requests(sim) == 2
            assert tally.cost_usd == sent * RATE / Decimal(1_000_000)
            assert gw.book.run.spent_tokens == gw.session_budget("run-1.embed")["spent_tokens"] == sent
            assert gw.meter.run.cost_usd == gw.book.run.spent_usd == tally.cost_usd
            assert_quiet(gw)
        finally:
            await gw.aclose()


async def test_a_tight_session_budget_stops_the_embedder_before_sending() -> None:
    async with SimProvider(SimConfig()) as sim:
        gw = Gateway(OpenAIProvider(api_key=KEY, base_url=sim.base_url), prices=PRICES, session_tokens=None)
        try:
            emb = choose_embedder("provider", gateway=gw, model="sim-embed", session_id="run-2.embed")
            agg = Aggregator(emb)
            await agg.add(result(1, SQL))
            assert embedding_requests(sim) == 0  # alone, nothing to compare it with: not embedded
            await agg.add(result(2, MD5))
            spent = gw.session_budget("run-2.embed")["spent_tokens"]
            assert spent == sim.stats()["tokens_in"] > 0
            # The cap is what was spent: reached, so the next call is refused before anything is sent.
            gw.set_session_budget("run-2.embed", tokens=spent)
            with pytest.raises(BudgetExhausted) as info:
                await agg.add(result(3, SQL.replace("escaping", "quoting")))
            assert info.value.scope == "session"
            assert embedding_requests(sim) == 1  # the refused call never reached the provider
            assert gw.session_budget("run-2.embed")["spent_tokens"] == spent
            assert_quiet(gw)
        finally:
            await gw.aclose()


async def test_service_serves_embeddings_to_the_openai_sdk_metered_and_budget_stopped() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def on_call(session_id: str, outcome: dict[str, Any]) -> None:
        calls.append((session_id, outcome))

    async with SimProvider(SimConfig()) as sim:
        gw = Gateway(OpenAIProvider(api_key=KEY, base_url=sim.base_url), prices=PRICES, session_tokens=None)
        service = GatewayService(gw, on_call=on_call)
        await service.start()
        client = openai.AsyncOpenAI(base_url=service.root_url + "/v1", api_key=service.issue("agent-7"), max_retries=0)
        try:
            texts = [SQL, MD5]
            # The SDK asks for base64 unless told otherwise; the gateway honours both formats.
            r = await client.embeddings.create(model="sim-embed", input=texts)
            for got, text in zip(r.data, texts, strict=True):
                assert got.embedding == pytest.approx(sim_embed(text, 384), abs=1e-6)
            f = await client.embeddings.create(model="sim-embed", input=SQL, encoding_format="float")
            assert f.data[0].embedding == pytest.approx(sim_embed(SQL, 384), abs=1e-9)
            tally = gw.session_usage("agent-7")
            assert tally.input_tokens == r.usage.prompt_tokens + f.usage.prompt_tokens == sim.stats()["tokens_in"]
            assert tally.calls == 2 and tally.cost_usd == tally.input_tokens * RATE / Decimal(1_000_000)
            assert [(sid, o["outcome"], o["kind"]) for sid, o in calls] == [("agent-7", "ok", "embeddings")] * 2
            assert calls[0][1]["usage"]["input_tokens"] == r.usage.prompt_tokens

            gw.set_session_budget("agent-7", tokens=tally.input_tokens)  # the cap is reached
            with pytest.raises(openai.APIStatusError) as refused:
                await client.embeddings.create(model="sim-embed", input=[MD5])
            assert refused.value.status_code == 402
            assert "budget_exceeded" in refused.value.response.text
            assert embedding_requests(sim) == 2
            assert calls[-1][1]["outcome"] == "budget_exhausted"

            bad = openai.AsyncOpenAI(base_url=service.root_url + "/v1", api_key="fgw-forged.abc", max_retries=0)
            with pytest.raises(openai.AuthenticationError):
                await bad.embeddings.create(model="sim-embed", input="x")
            await bad.close()
            with pytest.raises(openai.BadRequestError):
                await client.embeddings.create(model="sim-embed", input=[[1, 2, 3]])  # token arrays
            assert embedding_requests(sim) == 2
            assert KEY not in str(calls)
            assert_quiet(gw)
        finally:
            await client.close()
            await service.aclose()
            await gw.aclose()


async def test_service_answers_400_naming_the_fix_when_the_provider_has_no_embeddings() -> None:
    async with SimProvider(SimConfig()) as sim:
        gw = Gateway(AnthropicProvider(api_key=KEY, base_url=sim.root_url + "/v1"), session_tokens=None)
        service = GatewayService(gw)
        await service.start()
        client = openai.AsyncOpenAI(base_url=service.root_url + "/v1", api_key=service.issue("s"), max_retries=0)
        try:
            with pytest.raises(openai.BadRequestError) as info:
                await client.embeddings.create(model="text-embedding-3-small", input="x")
            assert "fleet.yaml" in info.value.response.text and KEY not in info.value.response.text
            assert embedding_requests(sim) == 0 and gw.session_usage("s").calls == 0
            assert_quiet(gw)
        finally:
            await client.close()
            await service.aclose()
            await gw.aclose()
