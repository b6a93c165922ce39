"""Hidden capacity, injected faults, stats, and running the simulated provider as its own process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
import openai
import pytest

from agent_fleet.sim.provider import SimConfig, SimProvider, sim_provider_process
from agent_fleet.testing.processes import stop

HI: list[Any] = [{"role": "user", "content": "hi"}]


def client_for(url: str, **kwargs: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0, **kwargs)


async def _status(client: openai.AsyncOpenAI, messages: list[Any] = HI) -> int:
    try:
        await client.chat.completions.create(model="m", messages=messages)
    except openai.APIStatusError as exc:
        return exc.status_code
    return 200


async def test_concurrency_cap_refuses_above_it_and_not_below() -> None:
    # each call is held 3 s: the nine of the second wave overlap even on a loaded machine, where
    # opening their connections can take longer than a short call lasts
    async with SimProvider(SimConfig(max_concurrency=4, latency=3.0)) as sim:
        client = client_for(sim.base_url)
        below = await asyncio.gather(*(_status(client) for _ in range(4)))
        assert below == [200] * 4
        above = await asyncio.gather(*(_status(client) for _ in range(9)))
        stats = sim.stats()
    assert sorted(above) == [200] * 4 + [429] * 5
    assert stats["max_in_flight"] == 4 and stats["in_flight"] == 0
    assert stats["rate_limited"] == {"concurrency": 5}


async def test_rpm_window_refuses_with_retry_after() -> None:
    async with SimProvider(SimConfig(rpm=3)) as sim:
        client = client_for(sim.base_url)
        assert [await _status(client) for _ in range(3)] == [200, 200, 200]
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="m", messages=HI)
        assert sim.stats()["rate_limited"] == {"rpm": 1}
    headers = caught.value.response.headers
    assert 58 <= int(headers["retry-after"]) <= 60
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-limit-requests"] == "3"


async def test_tpm_window_refuses_exactly_when_the_next_prompt_would_not_fit() -> None:
    tpm = 3000
    messages = [{"role": "user", "content": "Describe the stock re-order rules in detail. " * 40}]
    async with SimProvider(SimConfig(tpm=tpm)) as sim:
        client = client_for(sim.base_url)
        used = 0
        prompt = 0
        for _ in range(20):
            try:
                r = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
            except openai.RateLimitError as exc:
                assert exc.response.headers["x-ratelimit-limit-tokens"] == str(tpm)
                break
            assert r.usage is not None
            prompt = r.usage.prompt_tokens
            assert used + prompt <= tpm  # admitted: it fitted
            used += r.usage.prompt_tokens + r.usage.completion_tokens
        else:
            raise AssertionError("the token window never filled")
    assert used + prompt > tpm  # refused: it would not have fitted
    assert used > 0


async def test_stall_then_drop_and_stall_then_answer() -> None:
    async with SimProvider(SimConfig(rate_stall=1.0, stall_seconds=0.3, stall_drop=1.0)) as sim:
        started = time.monotonic()
        with pytest.raises(openai.APIConnectionError):
            await client_for(sim.base_url).chat.completions.create(model="m", messages=HI)
        assert time.monotonic() - started >= 0.3
        stats = sim.stats()
        assert (stats["stalls"], stats["dropped"], stats["in_flight"]) == (1, 1, 0)
    async with SimProvider(SimConfig(rate_stall=1.0, stall_seconds=0.3, stall_drop=0.0)) as sim:
        started = time.monotonic()
        r = await client_for(sim.base_url).chat.completions.create(model="m", messages=HI)
        assert time.monotonic() - started >= 0.3
        assert r.choices[0].message.content


async def test_in_flight_returns_to_zero_when_the_client_gives_up() -> None:
    async with SimProvider(SimConfig(latency=0.6)) as sim:
        with pytest.raises(openai.APITimeoutError):
            await client_for(sim.base_url, timeout=0.15).chat.completions.create(model="m", messages=HI)
        assert sim.stats()["in_flight"] == 1
        deadline = time.monotonic() + 5
        while sim.stats()["in_flight"] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert sim.stats()["in_flight"] == 0


async def test_latency_and_per_token_time() -> None:
    async with SimProvider(SimConfig(latency=0.2, per_output_token_s=0.004)) as sim:
        client = client_for(sim.base_url)
        started = time.monotonic()
        r = await client.chat.completions.create(model="m", messages=HI)
        elapsed = time.monotonic() - started
        assert r.usage is not None
        assert elapsed >= 0.2 + 0.004 * r.usage.completion_tokens
        started = time.monotonic()
        stream = await client.chat.completions.create(model="m", messages=HI, stream=True)
        chunks = [c async for c in stream]
        assert len(chunks) > 2
        assert time.monotonic() - started >= 0.2 + 0.004 * (r.usage.completion_tokens - 5)


async def test_injected_errors_follow_the_seed() -> None:
    async def statuses(seed: int) -> list[int]:
        async with SimProvider(SimConfig(rate_500=0.3, rate_429=0.2, seed=seed)) as sim:
            client = client_for(sim.base_url)
            return [await _status(client) for _ in range(40)]

    first, again, other = await statuses(42), await statuses(42), await statuses(7)
    assert first == again
    assert first != other
    assert {200, 429, 500} <= set(first)


async def test_stats_count_by_endpoint_and_status_and_reset_clears_everything() -> None:
    async with SimProvider(SimConfig(rpm=2)) as sim:
        client = client_for(sim.base_url)
        await _status(client)
        await client.embeddings.create(model="e", input="hello")
        await _status(client)
        assert await _status(client) == 429
        async with httpx.AsyncClient() as http:
            stats = (await http.get(sim.root_url + "/sim/stats")).json()
            assert stats["requests"] == {"/v1/chat/completions": {"200": 2, "429": 1}, "/v1/embeddings": {"200": 1}}
            assert stats["rate_limited"] == {"rpm": 1}
            assert stats["tokens_in"] > 0 and stats["tokens_out"] > 0
            assert (await http.post(sim.root_url + "/sim/reset")).status_code == 200
            stats = (await http.get(sim.root_url + "/sim/stats")).json()
        assert stats["requests_total"] == 0 and stats["rate_limited"] == {} and stats["tokens_in"] == 0
        assert await _status(client) == 200  # the request window was cleared too


def test_own_process_with_a_sync_client() -> None:
    with sim_provider_process(SimConfig(rpm=2)) as url:
        assert url.endswith("/v1")
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0)
        for _ in range(2):
            assert client.chat.completions.create(model="m", messages=HI).choices[0].message.content
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=HI)
        stats = httpx.get(url.removesuffix("/v1") + "/sim/stats").json()
        assert stats["rate_limited"] == {"rpm": 1}
    with pytest.raises(httpx.ConnectError):
        httpx.get(url.removesuffix("/v1") + "/sim/stats")


def _agent_fleet() -> str:
    return os.path.join(os.path.dirname(sys.executable), "agent-fleet")


def test_cli_serves_until_interrupted_and_never_shows_the_key() -> None:
    proc = subprocess.Popen(
        [_agent_fleet(), "sim-provider", "--port", "0", "--rpm", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        client = openai.OpenAI(base_url=url, api_key="sk-very-secret-key", max_retries=0)
        client.chat.completions.create(model="m", messages=HI)
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model="m", messages=HI)
        assert "sk-very-secret-key" not in caught.value.response.text
    finally:
        out, err = stop(proc, sig=signal.SIGINT, timeout=15)
    assert proc.returncode == 0
    assert "sk-very-secret-key" not in out + err


def test_cli_bad_setting_is_one_clear_line() -> None:
    result = subprocess.run(
        [_agent_fleet(), "sim-provider", "--rate-429", "3"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: rate_429 must be between 0 and 1, got 3.0"]
    assert result.stdout == ""


class _WorkClock:
    """A clock on which the server's own work takes time: rendering a reply costs ``work`` seconds."""

    def __init__(self, work: float) -> None:
        self.t = 100.0
        self.work = work
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 9))
        self.t += seconds


@pytest.mark.parametrize(
    ("config", "stream", "work", "sleeps"),
    [
        (SimConfig(latency=1.0), False, 0.25, [0.75]),  # the work is inside the latency
        (SimConfig(latency=1.0, per_output_token_s=0.001), False, 0.25, "tokens"),
        (SimConfig(latency=0.2), False, 0.25, []),  # work longer than the latency: no wait on top
        (SimConfig(latency=1.0, rate_stall=1.0, stall_seconds=3.0, stall_drop=0.0), False, 0.25, [3.0, 0.75]),
        (SimConfig(latency=1.0), True, 0.25, [0.75]),
    ],
)
async def test_latency_runs_from_the_request_s_arrival(
    config: SimConfig, stream: bool, work: float, sleeps: list[float] | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_fleet.sim import http_server as sim_server

    clock = _WorkClock(work)
    real_render = sim_server.render

    def slow_render(*args: Any, **kwargs: Any) -> Any:
        clock.t += clock.work
        return real_render(*args, **kwargs)

    monkeypatch.setattr(sim_server, "render", slow_render)
    async with SimProvider(config, clock=clock) as sim:
        client = client_for(sim.base_url)
        if stream:
            chunks = await client.chat.completions.create(model="m", messages=HI, stream=True)
            text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        else:
            r = await client.chat.completions.create(model="m", messages=HI)
            text = r.choices[0].message.content or ""
            tokens = r.usage.completion_tokens if r.usage else 0
    assert text
    if sleeps == "tokens":
        assert clock.sleeps == [round(1.0 + 0.001 * tokens - work, 9)]
    else:
        assert clock.sleeps == sleeps
