"""Which model serves a request, output limits, and what the gateway owns in a request."""

from __future__ import annotations

from agent_fleet.clock import VirtualClock
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.model_routes import ModelRoutes
from agent_fleet.spend.prices import DEFAULT_OUTPUT_LIMIT, PriceTable
from agent_fleet.spend.proxy import client_limit, forwarded_headers
from agent_fleet.testing.fakes import FakeProvider


def routes() -> tuple[ModelRoutes, FakeProvider, FakeProvider]:
    clock = VirtualClock()
    default = FakeProvider(clock, name="default", model="gpt-4.1-mini")
    deep = FakeProvider(clock, name="deep", model="claude-opus-4-5")
    gw = Gateway(
        default,
        clock=clock,
        routes={"deep": deep, "claude-opus-4-5": deep},
        aliases={"deep": "claude-opus-4-5"},
        model_aliases={"claude-opus-5-5": "deep", "claude-haiku-*": "gpt-4.1-mini", "*-preview": "claude-opus-4-5"},
    )
    return ModelRoutes(gw, gw.model_aliases), default, deep


def test_models_are_served_as_asked_unless_a_route_says_otherwise() -> None:
    r, default, deep = routes()
    served = r.resolve("claude-opus-4-5")  # a model id a models: entry serves
    assert (served.provider, served.model, served.substituted, served.routed) == (deep, "claude-opus-4-5", False, True)
    named = r.resolve("deep")  # a models: name
    assert (named.provider, named.model, named.via) == (deep, "claude-opus-4-5", "route")
    aliased = r.resolve("claude-opus-5-5")
    assert (aliased.provider, aliased.model, aliased.via) == (deep, "claude-opus-4-5", "alias claude-opus-5-5 -> deep")
    pattern = r.resolve("claude-haiku-4-5")
    assert (pattern.provider, pattern.model, pattern.substituted) == (default, "gpt-4.1-mini", True)
    assert r.resolve("gpt-5-preview").provider is deep  # the first pattern that matches, in order
    unknown = r.resolve("o3")
    assert (unknown.provider, unknown.model, unknown.substituted, unknown.routed) == (default, "o3", False, False)
    assert unknown.to_event()["name"] == "o3"


def test_output_limits() -> None:
    prices = PriceTable(output_limits={"my-llama": 8_000})
    assert prices.output_limit("claude-sonnet-4-5-20250929") == 64_000
    assert prices.output_limit("claude-opus-4-6") == 128_000 and prices.output_limit("claude-opus-4-1") == 32_000
    assert prices.output_limit("gpt-4.1-mini") == 32_768 and prices.output_limit("openai/gpt-4o") == 16_384
    assert prices.output_limit("my-llama") == 8_000  # fleet.yaml models: max_tokens
    assert prices.output_limit("sim-small") == DEFAULT_OUTPUT_LIMIT


def test_the_client_limit_and_the_headers_passed_on() -> None:
    assert client_limit({"max_tokens": 10, "max_completion_tokens": 20}, "openai") == ("max_completion_tokens", 20)
    assert client_limit({"max_tokens": 10}, "openai") == ("max_tokens", 10)
    assert client_limit({}, "openai") == (None, None)
    assert client_limit({"max_output_tokens": 5, "max_tokens": 9}, "responses") == ("max_output_tokens", 5)
    sent = {
        "Authorization": "Bearer fgw-x",
        "X-Api-Key": "fgw-x",
        "Content-Length": "10",
        "Accept-Encoding": "gzip",
        "Anthropic-Beta": "a,b",
        "anthropic-version": "2023-06-01",
        "X-Stainless-Retry-Count": "0",
        "Connection": "keep-alive",
    }
    assert forwarded_headers(sent) == {
        "anthropic-beta": "a,b",
        "anthropic-version": "2023-06-01",
        "x-stainless-retry-count": "0",
        "accept-encoding": "identity",
    }
