"""Aggregate against real loopback HTTP through the real gateway (metered and budgeted under its own
session ids): the simulated provider's embeddings endpoint, and the model-backed verifier."""

from __future__ import annotations

from decimal import Decimal

import pytest
from aiohttp import web

from agent_fleet.aggregate import (
    Aggregator,
    ModelVerifier,
    ProviderEmbedder,
    VerificationConfig,
    verify_results,
)
from agent_fleet.aggregate.provider_embedder import GatewayEmbeddingsClient
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import ClientRequestError, ProviderUnreachable, RateLimited
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.settings import SimConfig
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.spend.providers.openai import OpenAIProvider
from agent_fleet.spend.retry import RetryPolicy

KEY = "sk-sim-aggregate-secret"
RATE = Decimal("0.02")  # dollars per million input tokens


def result(i: int, body: str) -> ResultItem:
    return ResultItem(id=f"r{i}", partition_id=f"p{i % 5}", session_id=f"run.s{i}", title=f"Finding {i}", body=body)


def embedding_gateway(base_url: str, **kw: object) -> Gateway:
    prices = PriceTable(overrides={"sim-embed": Rates(input=RATE, output=Decimal(0))})
    return Gateway(OpenAIProvider(api_key=KEY, base_url=base_url), prices=prices, **kw)  # type: ignore[arg-type]


async def test_provider_embeddings_dedup_and_meter_usage() -> None:
    async with SimProvider(SimConfig()) as sim:
        gw = embedding_gateway(sim.base_url)
        client = GatewayEmbeddingsClient(gw, "sim-embed")
        try:
            emb = ProviderEmbedder(client, session_id="run-1.embed", model="sim-embed")
            agg = Aggregator(emb)
            body = "The login query concatenates the user name into the SQL statement without escaping it."
            await agg.add(result(1, body))
            d = await agg.add(result(2, body.replace("escaping", "quoting")))
            await agg.add(result(3, "Passwords are stored as unsalted MD5 hashes in the accounts table."))
            assert d.leader_id == "r1" and d.similarity >= 0.95
            s = agg.stats()
            assert (s.raw, s.unique, s.embedded) == (3, 2, 3)
            # the first result, alone, is embedded once a second joins it, in the same call: two calls,
            # each metered once, in the session's tally and the model's
            tally = gw.session_usage("run-1.embed")
            assert tally.calls == 2 and tally.input_tokens > 0 and tally.output_tokens == 0
            assert tally.cost_usd == tally.input_tokens * RATE / 1_000_000
            assert gw.meter.model("sim-embed").to_dict() == tally.to_dict()
            assert KEY not in repr(client) and KEY not in repr(gw.provider)
        finally:
            await gw.aclose()


async def test_embeddings_errors_are_mapped_without_the_key() -> None:
    async def limited(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"retry-after": "2"})

    async def bad(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "bad"}}, status=400)

    app = web.Application()
    app.router.add_post("/limited/embeddings", limited)
    app.router.add_post("/bad/embeddings", bad)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    once = RetryPolicy(max_attempts=1)
    try:
        gw = embedding_gateway(f"http://127.0.0.1:{port}/limited", retry=once)
        with pytest.raises(RateLimited) as info:
            await GatewayEmbeddingsClient(gw, "sim-embed").embed("s", ["x"])
        assert info.value.retry_after == 2.0 and KEY not in str(info.value)
        await gw.aclose()
        gw = embedding_gateway(f"http://127.0.0.1:{port}/bad", retry=once)
        with pytest.raises(ClientRequestError):
            await GatewayEmbeddingsClient(gw, "sim-embed").embed("s", ["x"])
        assert gw.session_usage("s").calls == 0  # an error answered is charged nothing
        await gw.aclose()
    finally:
        await runner.cleanup()
    gw = embedding_gateway(f"http://127.0.0.1:{port}/gone", retry=once)
    with pytest.raises(ProviderUnreachable) as gone:
        await GatewayEmbeddingsClient(gw, "sim-embed").embed("s", ["x"])
    assert KEY not in str(gone.value)
    await gw.aclose()


async def test_model_verifier_through_gateway_and_simulated_provider() -> None:
    config = SimConfig(verifier_refute_pct=20.0, verifier_unsure_pct=0.0)
    async with SimProvider(config) as sim:
        provider = OpenAIProvider(api_key=KEY, base_url=sim.base_url, model="gpt-4.1-mini")
        gateway = Gateway(provider, session_tokens=100_000)
        try:
            verifier = ModelVerifier(gateway, model="gpt-4.1-mini", session_for=lambda r: f"run-1.verify.{r.id}")
            rs = [result(i, f"Function f{i} in module m{i % 13}.py returns None on empty input.") for i in range(200)]
            cfg = VerificationConfig(fraction=1.0, minimum=1, seed=3, threshold=0.9, concurrency=16)
            report = await verify_results(rs, verifier, lambda r: [f"m{int(r.id[1:]) % 13}.py"], config=cfg)
            assert report.sampled == 200 and report.unsure == 0 and not report.skipped
            # the simulated verifier refutes about 20 % (decided by a hash of each request)
            assert 0.70 <= (report.agreement or 0) <= 0.90
            lo, hi = report.interval
            assert lo < report.agreement < hi  # type: ignore[operator]
            assert report.alarm  # below the 0.9 threshold
            # every verification was metered under its own session
            for r in rs[:20]:
                used = gateway.session_usage(f"run-1.verify.{r.id}")
                assert used.calls == 1 and used.total_tokens > 0
        finally:
            await gateway.aclose()
