"""Aggregate against real loopback HTTP: the simulated provider's embeddings endpoint, and the
model-backed verifier through the real gateway (metered and budgeted under its own session ids)."""

from __future__ import annotations

import pytest
from aiohttp import web

from agent_fleet.aggregate import (
    Aggregator,
    HttpEmbeddingsClient,
    ModelVerifier,
    ProviderEmbedder,
    VerificationConfig,
    verify_results,
)
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import ClientRequestError, ProviderUnreachable, RateLimited
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers.openai import OpenAIProvider
from agent_fleet.testing.sim_config import SimConfig
from agent_fleet.testing.sim_server import SimProvider

KEY = "sk-sim-aggregate-secret"


def result(i: int, body: str) -> ResultItem:
    return ResultItem(id=f"r{i}", partition_id=f"p{i % 5}", session_id=f"run.s{i}", title=f"Finding {i}", body=body)


async def test_provider_embeddings_dedup_and_meter_usage() -> None:
    charged: list[tuple[str, str, int]] = []
    async with SimProvider(SimConfig()) as sim:
        client = HttpEmbeddingsClient(
            base_url=sim.base_url, model="sim-embed", api_key=KEY, on_usage=lambda *a: charged.append(a)
        )
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
            assert [c[0] for c in charged] == ["run-1.embed"] * 3
            assert all(c[1] == "sim-embed" and c[2] > 0 for c in charged)
            assert client.tokens == sum(c[2] for c in charged)
            assert KEY not in repr(client)
        finally:
            await client.aclose()


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
    try:
        client = HttpEmbeddingsClient(base_url=f"http://127.0.0.1:{port}/limited", model="m", api_key=KEY)
        with pytest.raises(RateLimited) as info:
            await client.embed("s", ["x"])
        assert info.value.retry_after == 2.0 and KEY not in str(info.value)
        await client.aclose()
        client = HttpEmbeddingsClient(base_url=f"http://127.0.0.1:{port}/bad", model="m", api_key=KEY)
        with pytest.raises(ClientRequestError):
            await client.embed("s", ["x"])
        await client.aclose()
    finally:
        await runner.cleanup()
    client = HttpEmbeddingsClient(base_url=f"http://127.0.0.1:{port}/gone", model="m", api_key=KEY)
    with pytest.raises(ProviderUnreachable) as gone:
        await client.embed("s", ["x"])
    assert KEY not in str(gone.value)
    await client.aclose()


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
