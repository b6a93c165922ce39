"""Fallback along the declared chain inside the gateway, and the gateway built from fleet.yaml."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.config import parse_config
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted, ConfigError, OutOfQuota, QuotaExhausted
from agent_fleet.spend.factory import build_gateway
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import AnthropicProvider, OpenAIProvider
from agent_fleet.spend.router import Router
from agent_fleet.testing.fakes import FakeProvider

CFG = parse_config(
    {
        "models": [
            {"name": "fast", "model": "gpt-4.1-mini", "tier": "simple"},
            {
                "name": "deep",
                "model": "claude-opus-4-5",
                "provider": "anthropic",
                "tier": "complex",
                "fallback": ["fast"],
            },
        ],
        "budgets": {"session_tokens": 50_000, "model_usd": {"deep": 0.02}, "queue_usd": {"team-a": 1}},
        "rate_limit": {"baseline_concurrency": 12},
        "prices": {"gpt-4.1-mini": {"input": 1, "output": 1}},
    }
)


def two_models(clock: VirtualClock) -> tuple[Gateway, FakeProvider, FakeProvider, list[tuple[str, dict[str, str]]]]:
    fast = FakeProvider(clock, name="openai", model="gpt-4.1-mini", usage=Usage(1000, 100))
    deep = FakeProvider(clock, name="anthropic", model="claude-opus-4-5", usage=Usage(1000, 100))
    routes = {"fast": fast, "gpt-4.1-mini": fast, "deep": deep, "claude-opus-4-5": deep}
    decisions: list[tuple[str, dict[str, str]]] = []
    gw = Gateway(
        deep,
        routes=routes,
        aliases={"fast": "gpt-4.1-mini", "deep": "claude-opus-4-5"},
        clock=clock,
        router=Router(CFG.models),
        on_route=lambda sid, d: decisions.append((sid, d)),
        estimate_prompt=lambda r: 1000,
    )
    return gw, fast, deep, decisions


REQ = ChatRequest(model="deep", messages=[{"role": "user", "content": "hi"}], max_tokens=100)


async def test_quota_exhausted_falls_back_along_the_declared_chain():
    clock = VirtualClock()
    gw, fast, deep, decisions = two_models(clock)
    deep.script = [QuotaExhausted("insufficient_quota", status=429)]
    r = await gw.complete("s1", REQ)
    assert r.model == "gpt-4.1-mini"
    assert (deep.calls, fast.calls) == (1, 1)
    assert decisions == [
        (
            "s1",
            {
                "model": "gpt-4.1-mini",
                "name": "fast",
                "tier": "simple",
                "reason": "deep is out of quota; declared fallback",
            },
        )
    ]
    await gw.complete("s1", REQ)  # the exhausted model is skipped without being called again
    assert deep.calls == 1 and fast.calls == 2


async def test_out_of_quota_with_no_route_left_stops_the_run() -> None:
    """Both models out of quota: no session can go on, so the call raises OutOfQuota (exit 4) and the
    provider's health names it, which stops the run (resumable) instead of failing every session."""
    clock = VirtualClock()
    gw, fast, deep, _ = two_models(clock)
    assert gw.provider_down() is None
    deep.script = [QuotaExhausted("insufficient_quota", status=429)]
    fast.script = [QuotaExhausted("insufficient_quota", status=429)]
    with pytest.raises(OutOfQuota) as raised:
        await gw.complete("s1", REQ)
    assert raised.value.exit_code == 4 and raised.value.status == 429
    assert (deep.calls, fast.calls) == (1, 1)  # the declared fallback was tried first
    down = gw.provider_down()
    assert down is not None and "is out of quota: insufficient_quota" in str(down) and down.exit_code == 4


async def test_out_of_quota_without_a_router_stops_the_run() -> None:
    clock = VirtualClock()
    only = FakeProvider(clock, name="openai", model="gpt-4.1-mini", usage=Usage(10, 5))
    gw = Gateway(only, clock=clock, estimate_prompt=lambda r: 10)
    only.script = [QuotaExhausted("insufficient_quota", status=429)]
    with pytest.raises(OutOfQuota):
        await gw.complete("s1", ChatRequest(model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}]))
    assert gw.provider_down() is not None


async def test_a_model_budget_falls_back_but_a_session_budget_pauses():
    clock = VirtualClock()
    gw, fast, _deep, decisions = two_models(clock)
    gw.set_model_budget("claude-opus-4-5", usd=Decimal("0.01"))  # opus: 1000 × $5 + 100 × $25 per MTok = $0.0075
    await gw.complete("s1", REQ)
    r = await gw.complete("s1", REQ)  # $0.0025 left: admitted, the call that crosses the cap finishes
    assert r.model == "claude-opus-4-5"
    r = await gw.complete("s1", REQ)
    assert r.model == "gpt-4.1-mini" and "reached its model budget" in decisions[-1][1]["reason"]
    gw.set_session_budget("s2", tokens=500)
    await gw.complete("s2", REQ)
    with pytest.raises(BudgetExhausted) as info:
        await gw.complete("s2", REQ)
    assert info.value.scope == "session"
    assert fast.calls == 2


async def test_build_gateway_from_fleet_yaml():
    env = {"FLEET_API_KEY": "sk-cfg-SECRET", "FLEET_BASE_URL": "http://127.0.0.1:9/v1"}
    gw = build_gateway(CFG, env=env, run_id="run-x")
    try:
        assert isinstance(gw.routes["fast"], OpenAIProvider)
        assert isinstance(gw.routes["claude-opus-4-5"], AnthropicProvider)
        assert gw.aliases == {"fast": "gpt-4.1-mini", "deep": "claude-opus-4-5"}
        assert gw.limiter.total == 12
        assert gw.book.defaults["session"] == (50_000, None)
        assert gw.book.find("model", "claude-opus-4-5").cap_usd == Decimal("0.02")
        assert gw.book.find("queue", "default/team-a").cap_usd == Decimal("1")  # a LocalQueue: ns/name
        assert gw.prices.rates("gpt-4.1-mini").input == Decimal(1)  # the override beats the table
        assert gw.router is not None
        assert "sk-cfg-SECRET" not in repr(gw) + repr(gw.routes)
    finally:
        await gw.aclose()
    one = build_gateway(None, provider="anthropic", model="claude-sonnet-4-5", api_key="k", session_usd="0.5")
    try:
        assert isinstance(one.provider, AnthropicProvider) and one.router is None
        assert one.book.defaults["session"] == (128_000, Decimal("0.5"))
    finally:
        await one.aclose()


def test_a_missing_key_variable_is_a_config_error():
    cfg = parse_config({"models": [{"name": "a", "model": "gpt-4.1", "api_key_env": "NOPE_KEY"}]})
    with pytest.raises(ConfigError, match=r"\$NOPE_KEY is not set"):
        build_gateway(cfg, env={})
