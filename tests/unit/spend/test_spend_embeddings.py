"""Embeddings through the gateway: reserve-then-reconcile, limits, retries and metering (virtual clock)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from agent_fleet.aggregate import LexicalEmbedder, ProviderEmbedder, choose_embedder
from agent_fleet.aggregate.provider_embedder import GatewayEmbeddingsClient
from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import (
    BudgetExhausted,
    ClientRequestError,
    ConfigError,
    Overloaded,
    ProviderError,
    QuotaExhausted,
    RateLimited,
    UsageError,
)
from agent_fleet.spend.embedding_calls import embedding_batches, raw_embedding_estimate
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.spend.providers import AnthropicProvider, ProviderTimeout
from agent_fleet.testing.fakes import FakeProvider

EMB = "emb"
RATE = Decimal("0.1")  # $ per million input tokens
PRICES = PriceTable(
    overrides={EMB: Rates(input=RATE, output=Decimal(0)), "m": Rates(input=Decimal(1), output=Decimal(4))}
)
TEXT = "x" * 297  # 297 bytes // 3 + 1 = 100 estimated tokens


@dataclass
class FakeEmbedder:
    """An in-process embeddings endpoint (the paid-model boundary): scripted failures, per-text usage."""

    clock: VirtualClock
    name: str = "fake-emb"
    kind: str = "openai"
    max_embedding_batch: int = 256
    latency: float = 0.0
    tokens_per_text: int = 80
    script: list[BaseException | Callable[[Sequence[str]], tuple[list[list[float]], Usage]]] = field(
        default_factory=list
    )
    requests: list[list[str]] = field(default_factory=list)
    seen_reserved: list[int] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)
    gateway: Gateway | None = None

    async def embed(
        self, texts: Sequence[str], model: str, *, dimensions: int | None = None
    ) -> tuple[list[list[float]], Usage]:
        self.requests.append(list(texts))
        self.sent_at.append(self.clock.now())
        if self.gateway is not None:
            self.seen_reserved.append(self.gateway.statistics().reserved_tokens)
        if self.latency:
            await self.clock.sleep(self.latency)
        step = self.script.pop(0) if self.script else None
        if isinstance(step, BaseException):
            raise step
        if step is not None:
            return step(texts)
        vectors = [[float(len(t)), 1.0, float(i)] for i, t in enumerate(texts)]
        return vectors, Usage(input_tokens=self.tokens_per_text * len(texts))

    async def complete(self, request: ChatRequest) -> Any:
        raise AssertionError("no chat calls here")

    async def aclose(self) -> None:
        pass


def make(clock: VirtualClock, **kw: Any) -> tuple[Gateway, FakeEmbedder]:
    provider = kw.pop("provider", None) or FakeEmbedder(clock)
    kw.setdefault("prices", PRICES)
    kw.setdefault("rand", lambda: 0.0)
    gw = Gateway(provider, clock=clock, **kw)
    if isinstance(provider, FakeEmbedder):
        provider.gateway = gw
    return gw, provider


def usd(tokens: int, rate: Decimal = RATE) -> Decimal:
    return tokens * rate / Decimal(1_000_000)


def assert_quiet(gw: Gateway) -> None:
    s = gw.statistics()
    assert s.in_flight == 0
    assert (s.reserved_tokens, s.reserved_usd, s.open_reservations) == (0, 0, 0)
    assert s.concurrency.borrowed_tokens == 0


def assert_fleet_is_sum_of_sessions(gw: Gateway) -> None:
    run = gw.book.run
    sessions = [a for (scope, _), a in gw.book.accounts.items() if scope == "session"]
    assert run.spent_tokens == sum(a.spent_tokens for a in sessions)
    assert run.spent_usd == sum((a.spent_usd for a in sessions), Decimal(0))
    tallies = gw.meter.sessions.values()
    assert gw.meter.run.input_tokens == sum(t.input_tokens for t in tallies)
    assert gw.meter.run.cost_usd == sum((t.cost_usd for t in tallies), Decimal(0)) == run.spent_usd


# --- reserve, then reconcile -------------------------------------------------------------------------


async def test_reserves_the_estimate_and_charges_the_reported_tokens() -> None:
    clock = VirtualClock()
    gw, provider = make(clock)
    assert raw_embedding_estimate(TEXT) == 100
    result = await gw.embed("s1", [TEXT] * 3, model=EMB)
    assert provider.seen_reserved == [300]  # 3 × 100 estimated, no output tokens
    assert result.usage == Usage(input_tokens=240)
    assert result.cost_usd == usd(240) == Decimal("0.000024")
    assert result.model == EMB and [v[0] for v in result.vectors] == [297.0] * 3
    budget = gw.session_budget("s1")
    assert (budget["spent_tokens"], Decimal(budget["spent_usd"])) == (240, usd(240))
    tally = gw.session_usage("s1")
    assert (tally.input_tokens, tally.output_tokens, tally.calls) == (240, 0, 1)
    assert gw.meter.model(EMB).input_tokens == 240
    assert_quiet(gw)
    # The estimate calibrates down slowly (ratio 0.8 → factor 0.98): the next reservation is 294.
    await gw.embed("s1", [TEXT] * 3, model=EMB)
    assert provider.seen_reserved == [300, 294]


async def test_a_prompt_larger_than_its_estimate_raises_the_next_reservation_at_once() -> None:
    clock = VirtualClock()
    gw, provider = make(clock, provider=FakeEmbedder(clock, tokens_per_text=150))
    await gw.embed("s1", [TEXT], model=EMB)
    await gw.embed("s1", [TEXT], model=EMB)
    assert provider.seen_reserved == [100, 150]
    assert gw.session_budget("s1")["spent_tokens"] == 300


async def test_budget_stops_before_sending() -> None:
    clock = VirtualClock()
    gw, provider = make(clock, provider=FakeEmbedder(clock, tokens_per_text=100), session_tokens=500)
    await gw.embed("s1", [TEXT] * 2, model=EMB)
    await gw.embed("s1", [TEXT] * 3, model=EMB)  # 200 spent, 300 asked: admitted, the cap is not reached
    assert gw.session_budget("s1")["spent_tokens"] == 500
    with pytest.raises(BudgetExhausted) as info:
        await gw.embed("s1", [TEXT], model=EMB)  # 500 spent: the cap is reached
    assert info.value.scope == "session"
    assert len(provider.requests) == 2
    assert_quiet(gw)


async def test_a_call_that_cannot_fit_sends_none_of_its_batches() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock, max_embedding_batch=2, tokens_per_text=100)
    gw, _ = make(clock, provider=provider, session_tokens=400)
    with pytest.raises(BudgetExhausted):
        await gw.embed("s1", [TEXT] * 5, model=EMB)  # the first batch (200) would fit; the call (500) not
    assert provider.requests == []
    result = await gw.embed("s1", [TEXT] * 4, model=EMB)
    assert [len(r) for r in provider.requests] == [2, 2]
    assert provider.seen_reserved == [200, 200]  # one reservation per request
    assert result.usage.input_tokens == 400 and gw.session_usage("s1").calls == 2
    assert_quiet(gw)


@pytest.mark.parametrize("scope", ["run", "queue", "model"])
async def test_every_cap_that_applies_stops_an_embeddings_call(scope: str) -> None:
    clock = VirtualClock()
    gw, provider = make(clock, provider=FakeEmbedder(clock, tokens_per_text=100), session_tokens=None)
    gw.register_session("s1", queue="team-a")
    cap = usd(250)  # room for two texts of 100 tokens, not three
    if scope == "run":
        gw.set_run_budget(usd=cap)
    elif scope == "queue":
        gw.set_queue_budget("team-a", usd=cap)
    else:
        gw.set_model_budget(EMB, usd=cap)
    await gw.embed("s1", [TEXT] * 2, model=EMB)
    await gw.embed("s1", [TEXT], model=EMB)  # under the cap: admitted, and it finishes (300 > 250)
    with pytest.raises(BudgetExhausted) as info:
        await gw.embed("s1", [TEXT], model=EMB)
    assert info.value.scope == scope
    assert len(provider.requests) == 2
    assert_quiet(gw)


async def test_unreported_usage_is_charged_the_estimate() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock)
    provider.script = [lambda texts: ([[1.0, 0.0]] * len(texts), Usage())]
    gw, _ = make(clock, provider=provider)
    result = await gw.embed("s1", [TEXT, TEXT], model=EMB)
    assert result.usage.input_tokens == 200 and result.cost_usd == usd(200)
    assert gw.session_budget("s1")["spent_tokens"] == 200


# --- errors, retries, cancellation: nothing leaks ------------------------------------------------------


async def test_rate_limited_request_waits_retry_after_and_is_charged_once() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock)
    provider.script = [RateLimited("slow down", status=429, retry_after=5.0)]
    gw, _ = make(clock, provider=provider)
    task = asyncio.create_task(gw.embed("s1", [TEXT], model=EMB))
    await clock.run_for(4.9)
    assert not task.done() and len(provider.requests) == 1
    await clock.run_for(0.2)
    result = await task
    assert result.retried == ("rate_limited",)
    assert len(provider.requests) == 2
    assert gw.meter.run.errors["rate_limited"] == 1
    assert (gw.meter.run.calls, gw.meter.run.input_tokens) == (1, 80)
    assert_quiet(gw)


async def test_server_errors_back_off_exactly_as_chat_calls_then_give_up() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock)
    provider.script = [Overloaded("busy", status=503) for _ in range(4)]
    gw, _ = make(clock, provider=provider)
    task = asyncio.create_task(gw.embed("s1", [TEXT], model=EMB))
    await clock.run_for(10)
    with pytest.raises(Overloaded):
        await task
    assert len(provider.requests) == 4  # max_attempts
    assert provider.sent_at == [0.0, 0.5, 1.5, 3.5]  # base 0.5 s doubling, rand 0: no jitter
    assert gw.meter.run.errors["server"] == 4
    assert gw.session_budget("s1")["spent_tokens"] == 0  # answered errors cost nothing
    assert_quiet(gw)


@pytest.mark.parametrize(
    "error",
    [ClientRequestError("bad input", status=400), QuotaExhausted("no credit", status=429)],
)
async def test_errors_that_are_not_retried_release_everything(error: Exception) -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock)
    provider.script = [error]
    gw, _ = make(clock, provider=provider)
    with pytest.raises(type(error)):
        await gw.embed("s1", [TEXT], model=EMB)
    assert len(provider.requests) == 1
    assert gw.session_budget("s1")["spent_tokens"] == 0
    assert_quiet(gw)


async def test_a_timeout_after_sending_is_charged_the_reservation() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock)
    timeout = ProviderTimeout("no answer")
    timeout.sent = True  # type: ignore[attr-defined]
    provider.script = [timeout]
    gw, _ = make(clock, provider=provider)
    with pytest.raises(ProviderTimeout):
        await gw.embed("s1", [TEXT] * 2, model=EMB)
    assert len(provider.requests) == 1  # never resent: it may have been processed
    assert gw.session_budget("s1")["spent_tokens"] == 200
    assert Decimal(gw.session_budget("s1")["spent_usd"]) == usd(200)
    assert_quiet(gw)
    assert_fleet_is_sum_of_sessions(gw)


async def test_cancellation_on_the_wire_charges_the_reservation_and_in_the_queue_nothing() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock, latency=10.0)
    gw, _ = make(clock, provider=provider, concurrency=1, adaptive=False)
    on_wire = asyncio.create_task(gw.embed("s1", [TEXT] * 3, model=EMB))
    queued = asyncio.create_task(gw.embed("s2", [TEXT], model=EMB))
    await clock.run_for(1.0)
    assert len(provider.requests) == 1 and gw.statistics().concurrency.tasks_waiting == 1
    queued.cancel()
    on_wire.cancel()
    for task in (queued, on_wire):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert gw.session_budget("s1")["spent_tokens"] == 300  # fate unknown: the worst case
    assert gw.session_budget("s2")["spent_tokens"] == 0  # never sent
    assert_quiet(gw)
    assert_fleet_is_sum_of_sessions(gw)


async def test_wrong_vector_count_is_an_error_but_still_charged() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock)
    provider.script = [lambda texts: ([[1.0]], Usage(input_tokens=77))]
    gw, _ = make(clock, provider=provider)
    with pytest.raises(ProviderError, match="1 vectors for 2 texts"):
        await gw.embed("s1", [TEXT, TEXT], model=EMB)
    assert gw.session_budget("s1")["spent_tokens"] == 77
    assert_quiet(gw)


async def test_fleet_spent_is_the_sum_of_sessions_with_chat_and_embeddings_mixed() -> None:
    clock = VirtualClock()
    emb = FakeEmbedder(clock, name="emb-endpoint", latency=0.5)
    chat = FakeProvider(clock, name="chat-endpoint", model="m", usage=Usage(300, 100), latency=0.3)
    gw = Gateway(chat, routes={EMB: emb}, clock=clock, prices=PRICES, run_usd="100", rand=lambda: 0.0)
    emb.gateway = gw
    req = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=200)

    async def drive() -> None:
        async with asyncio.TaskGroup() as tg:
            for i in range(30):
                sid = f"s{i % 4}"
                if i % 3:
                    tg.create_task(gw.embed(sid, [TEXT] * (1 + i % 5), model=EMB))
                else:
                    tg.create_task(gw.complete(sid, req))

    async with asyncio.TaskGroup() as tg:
        tg.create_task(drive())
        tg.create_task(clock.run_for(60))
    texts = sum(1 + i % 5 for i in range(30) if i % 3)
    assert gw.meter.model(EMB).input_tokens == 80 * texts
    assert gw.meter.model("m").input_tokens == 300 * 10
    assert gw.meter.run.cost_usd == usd(80 * texts) + 10 * (300 * 1 + 100 * 4) / Decimal(1_000_000)
    assert_fleet_is_sum_of_sessions(gw)
    assert_quiet(gw)


# --- routing, prices, providers --------------------------------------------------------------------------


async def test_embedding_model_priced_by_genai_prices_or_a_fleet_yaml_override() -> None:
    clock = VirtualClock()
    provider = FakeEmbedder(clock, tokens_per_text=1_000_000)
    gw, _ = make(clock, provider=provider, prices=PriceTable(), session_tokens=None)
    listed = await gw.embed("s1", ["a"], model="text-embedding-3-small")
    assert listed.cost_usd == Decimal("0.02")  # genai-prices: $0.02 per million input tokens
    override = PriceTable(overrides={"text-embedding-3-small": Rates(input=Decimal("0.5"), output=Decimal(0))})
    gw2, _ = make(clock, provider=FakeEmbedder(clock, tokens_per_text=1_000_000), prices=override, session_tokens=None)
    assert (await gw2.embed("s1", ["a"], model="text-embedding-3-small")).cost_usd == Decimal("0.5")


async def test_a_fleet_yaml_name_routes_to_its_endpoint_and_model_id() -> None:
    clock = VirtualClock()
    emb = FakeEmbedder(clock, name="emb-endpoint")
    chat = FakeProvider(clock, name="chat-endpoint", model="m")
    gw = Gateway(chat, routes={"embedder": emb, EMB: emb}, aliases={"embedder": EMB}, clock=clock, prices=PRICES)
    result = await gw.embed("s1", [TEXT], model="embedder")
    assert result.model == EMB and result.cost_usd == usd(80)
    assert gw.meter.model(EMB).calls == 1 and chat.calls == 0


async def test_anthropic_has_no_embeddings_and_says_how_to_fix_it() -> None:
    clock = VirtualClock()
    anthropic = AnthropicProvider(api_key="sk-ant-secret", base_url="http://127.0.0.1:9/v1")
    gw = Gateway(anthropic, clock=clock, prices=PRICES)
    try:
        with pytest.raises(ConfigError) as info:
            await gw.embed("s1", [TEXT], model=EMB)
        assert "fleet.yaml" in str(info.value) and "OpenAI-compatible" in str(info.value)
        assert "sk-ant-secret" not in str(info.value)
        with pytest.raises(ConfigError, match="Anthropic has no embeddings endpoint"):
            await anthropic.embed([TEXT], EMB)
        assert gw.session_usage("s1").calls == 0
        assert_quiet(gw)
    finally:
        await gw.aclose()


async def test_empty_input_sends_nothing() -> None:
    clock = VirtualClock()
    gw, provider = make(clock)
    result = await gw.embed("s1", [], model=EMB)
    assert (result.vectors, result.usage, provider.requests) == ([], Usage(), [])


def test_batches_by_count_and_estimated_tokens() -> None:
    assert embedding_batches([1] * 5, max_inputs=2) == [range(0, 2), range(2, 4), range(4, 5)]
    assert embedding_batches([60, 60, 60, 500, 10], max_inputs=10, max_tokens=150) == [
        range(0, 2),
        range(2, 3),
        range(3, 4),  # larger than a request may be: alone, the provider judges it
        range(4, 5),
    ]
    assert embedding_batches([], max_inputs=3) == []


# --- the OpenAI provider over loopback ----------------------------------------------------------------


async def test_gateway_client_and_choose_embedder_provider() -> None:
    clock = VirtualClock()
    gw, provider = make(clock)
    emb = choose_embedder("provider", gateway=gw, model=EMB, session_id="run-1.embed")
    assert isinstance(emb, ProviderEmbedder) and emb.session_id == "run-1.embed"
    assert emb.name.startswith(f"provider:{EMB}")
    vectors = await emb.embed(["ab", "abcd"])
    assert [round(v[0] / v[1], 4) for v in vectors] == [2.0, 4.0]  # the endpoint's vectors, renormalised
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-6 for v in vectors)
    assert gw.session_usage("run-1.embed").input_tokens == 160
    assert isinstance(choose_embedder("lexical"), LexicalEmbedder)
    with pytest.raises(UsageError, match="gateway"):
        choose_embedder("provider", model=EMB)
    with pytest.raises(UsageError, match="provider"):
        choose_embedder("nope")
    client = GatewayEmbeddingsClient(gw, EMB)
    assert await client.embed("s9", []) == [] and provider.requests == [["ab", "abcd"]]


async def test_provider_embedder_cuts_long_texts_into_windows() -> None:
    seen: list[list[str]] = []

    class Client:
        async def embed(self, session_id: str, texts: Sequence[str]) -> list[list[float]]:
            seen.append(list(texts))
            return [[1.0, 0.0] if t.startswith("a") else [0.0, 1.0] for t in texts]

    emb = ProviderEmbedder(Client(), session_id="s", model="m", max_input_bytes=100, batch_size=4)
    long = "a" * 60 + " " + "b" * 90  # 151 bytes: cut at the space, then "b" * 90 (with its space) fits
    vectors = await emb.embed(["short", long, "é" * 80])
    pieces = [p for batch in seen for p in batch]
    assert pieces[:3] == ["short", "a" * 60, " " + "b" * 90]
    assert all(len(p.encode()) <= 100 for p in pieces)
    assert "".join(pieces[3:]) == "é" * 80  # 160 bytes cut between characters, never inside one
    assert [len(b) for b in seen] == [4, 1]
    # "short" → [0, 1]; the long text → the length-weighted mean of [1, 0] (60) and [0, 1] (91)
    assert list(vectors[0]) == [0.0, 1.0]
    norm = math.hypot(60, 91)
    assert list(vectors[1]) == pytest.approx([60 / norm, 91 / norm], rel=1e-6)
