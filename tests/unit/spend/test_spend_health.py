"""When a provider stops the run: the pure rule and the gateway that applies it, on a virtual clock."""

from __future__ import annotations

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.error_kinds import ErrorKind
from agent_fleet.domain.model import ChatRequest
from agent_fleet.errors import (
    MalformedResponse,
    Overloaded,
    ProviderAuthError,
    ProviderDown,
    ProviderUnreachable,
    RateLimited,
)
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.provider_health import ProviderHealth
from agent_fleet.spend.retry import RetryPolicy
from agent_fleet.testing.fakes import FakeProvider

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=10)


def test_no_success_for_the_bound_is_the_verdict_and_a_success_restarts_it() -> None:
    h = ProviderHealth("p", give_up_after_s=30.0)
    assert h.verdict(1000.0) is None and h.down_in(1000.0) is None  # idle: never down
    h.failure(100.0, ErrorKind.SERVER, Overloaded("boom", status=500))
    assert h.down_in(110.0) == 20.0
    assert h.verdict(129.999) is None
    h.failure(120.0, ErrorKind.TIMEOUT, ProviderUnreachable("slow"))  # the clock runs from the first
    down = h.verdict(130.0)
    assert isinstance(down, ProviderDown) and down.exit_code == 4
    assert "no call succeeded for 30 s" in str(down) and "2 failed" in str(down) and "slow" in str(down)
    h.success(131.0)
    assert h.verdict(500.0) is None
    h.failure(200.0, ErrorKind.BAD_RESPONSE, MalformedResponse("html", status=200))
    assert h.down_in(215.0) == 15.0 and h.verdict(230.0) is not None


def test_429s_never_count_and_outage_starts_at_a_sixth_of_the_bound() -> None:
    h = ProviderHealth("p", give_up_after_s=60.0)
    for t in range(0, 600, 5):
        h.failure(float(t), ErrorKind.RATE_LIMITED, RateLimited("slow down", status=429))
    assert h.verdict(600.0) is None and not h.in_outage(600.0)
    h.failure(600.0, ErrorKind.UNREACHABLE, ProviderUnreachable("refused"))
    assert not h.in_outage(609.999) and h.in_outage(610.0)


def test_refused_credentials_are_the_verdict_at_once_and_stay() -> None:
    h = ProviderHealth("openai (api.example)", give_up_after_s=60.0)
    h.failure(5.0, ErrorKind.AUTH, ProviderAuthError("api.example answered 401 (invalid_api_key)", status=401))
    h.success(6.0)
    down = h.verdict(6.0)
    assert down is not None and h.down_in(6.0) == 0.0
    assert (
        str(down) == "provider openai (api.example) refused the credentials: api.example answered 401 (invalid_api_key)"
    )


async def test_the_gateway_reports_its_provider_down_at_the_exact_bound() -> None:
    clock = VirtualClock()
    provider = FakeProvider(clock=clock)
    gw = Gateway(provider, clock=clock, give_up_after_s=20.0, retry=RetryPolicy(max_attempts=1), adaptive=False)
    provider.script = [Overloaded("boom", status=503)]
    with pytest.raises(Overloaded) as first:
        await gw.complete("s1", REQ)
    assert first.value.outage is False  # type: ignore[attr-defined]
    clock.advance(19.0)
    assert gw.provider_down() is None
    provider.script = [MalformedResponse("html", status=200)]
    with pytest.raises(MalformedResponse) as second:
        await gw.complete("s1", REQ)
    assert second.value.outage is True  # type: ignore[attr-defined]  # 19 s >= 20 / 6 without a success
    clock.advance(1.0)
    down = gw.provider_down()
    assert down is not None and "no call succeeded for 20 s" in str(down) and "fake" in str(down)
    await gw.complete("s1", REQ)  # a success: the provider is back
    assert gw.provider_down() is None
    provider.script = [ProviderAuthError("answered 401", status=401)]
    with pytest.raises(ProviderAuthError):
        await gw.complete("s2", REQ)
    assert "refused the credentials" in str(gw.provider_down())


def test_a_refusal_of_the_request_itself_is_an_answer_not_an_outage() -> None:
    from agent_fleet.errors import ClientRequestError, ContextLengthExceeded

    health = ProviderHealth("local", give_up_after_s=60)
    health.failure(0.0, ErrorKind.CONTEXT_LENGTH, ContextLengthExceeded("prompt is too long", status=400))
    health.failure(1.0, ErrorKind.CLIENT, ClientRequestError("bad request", status=400))
    assert health.verdict(1000.0) is None and health.down_in(1000.0) is None
