"""Slow is not down (virtual clock, exact times): a call that keeps streaming is never given up and
keeps its provider alive; a silent server times out after the configured silence and is down after
``give_up_after_s`` with no answer and no progress; a call that is not streamed may take its
``max_tokens`` at the model's observed pace."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from decimal import Decimal

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.domain.error_kinds import ErrorKind
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ProviderTimeout
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.patience import ASSUMED_SECONDS_PER_TOKEN, MARGIN, current_watch, report_progress
from agent_fleet.spend.prices import PriceTable, Rates

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "hello"}], max_tokens=100)
PRICES = PriceTable(overrides={"m": Rates(input=Decimal(1), output=Decimal(4))})
SILENCE = 30.0
GIVE_UP = 60.0


@dataclass
class LocalServer:
    """A model server on a virtual clock: streams a token every ``every`` seconds (or stays silent),
    or answers whole after ``whole`` seconds."""

    clock: VirtualClock
    name: str = "local"
    model: str = "m"
    watched = True  # the gateway watches its calls; it reports progress as a transport does
    tokens: int = 100
    every: float | None = None  # streaming: seconds between tokens; None: answers whole
    whole: float = 0.0
    silent: bool = False
    calls: list[float] = field(default_factory=list)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls.append(self.clock.now())
        watch = current_watch()
        assert watch is not None
        watch.sending(streaming=self.every is not None)
        if self.silent:
            await self.clock.sleep(10_000)
        if self.every is not None:
            for _ in range(self.tokens):
                await self.clock.sleep(self.every)
                report_progress()
        else:
            await self.clock.sleep(self.whole)
        return ChatResponse("done", usage=Usage(50, self.tokens), model=self.model)

    async def aclose(self) -> None:
        pass


def gateway(clock: VirtualClock, server: LocalServer) -> Gateway:
    return Gateway(
        server,
        clock=clock,
        prices=PRICES,
        estimate_prompt=lambda request: 50,
        timeout_s=SILENCE,
        give_up_after_s=GIVE_UP,
        rand=lambda: 0.0,
    )


async def test_a_call_that_streams_slowly_is_never_given_up_and_keeps_its_provider_alive() -> None:
    clock = VirtualClock()
    # 100 tokens, one every 20 s: 2,000 s for the answer, each gap under the 30 s of silence allowed
    server = LocalServer(clock, every=20.0)
    gw = gateway(clock, server)
    lane = gw.traffic.lanes[server.name]
    assert lane.health is not None
    lane.health.failure(0.0, ErrorKind.TIMEOUT, ProviderTimeout("an earlier call timed out"))  # failing since 0
    async with clock.auto_advance():
        call = asyncio.ensure_future(gw.complete("s1", REQ))
        while not call.done():
            await clock.sleep(5.0)
            assert gw.provider_down() is None, clock.now()  # failing since 0, but alive: progress
        answer = await call
    assert clock.now() == pytest.approx(2000.0, abs=5.0)
    assert answer.content == "done" and answer.usage.output_tokens == 100
    assert gw.provider_down() is None


async def test_a_silent_server_times_out_after_the_configured_silence_and_is_down_after_give_up() -> None:
    clock = VirtualClock()
    server = LocalServer(clock, every=1.0, silent=True)
    gw = gateway(clock, server)
    async with clock.auto_advance():
        with pytest.raises(ProviderTimeout) as info:
            await gw.complete("s1", REQ)
    assert clock.now() == SILENCE  # exactly the configured silence: no answer and no progress
    assert getattr(info.value, "sent", False) is True  # never sent again by the gateway
    assert len(server.calls) == 1
    # charged at its reservation (the prompt estimate + max_tokens), and the error says what was charged
    usage, cost = info.value.charged  # type: ignore[attr-defined]
    assert (usage.input_tokens, usage.output_tokens) == (50, 100)
    assert gw.session_usage("s1").total_tokens == 150 and cost == Decimal("0.00045")
    assert gw.provider_down() is None
    clock.set(SILENCE + GIVE_UP - 0.001)
    assert gw.provider_down() is None
    clock.set(SILENCE + GIVE_UP)
    down = gw.provider_down()
    assert down is not None and "no call succeeded for 60 s" in str(down)


async def test_a_whole_answer_may_take_its_max_tokens_at_the_observed_pace() -> None:
    clock = VirtualClock()
    first_limit = SILENCE + 100 * ASSUMED_SECONDS_PER_TOKEN * MARGIN  # 40 s before any answer was seen
    server = LocalServer(clock, whole=first_limit - 1)
    gw = gateway(clock, server)
    async with clock.auto_advance():
        await gw.complete("s1", REQ)  # 39 s: inside the assumed pace
        # observed: 39 s for 100 tokens → the next call may take 30 + 100 × 0.39 × 2 = 108 s
        server.whole = 107.0
        start = clock.now()
        await gw.complete("s1", REQ)
        assert clock.now() - start == 107.0
        server.whole = 500.0
        start = clock.now()
        with pytest.raises(ProviderTimeout):
            await gw.complete("s1", REQ)
    pace = 0.39 + 0.3 * (1.07 - 0.39)  # the moving average after the second answer
    assert clock.now() - start == pytest.approx(SILENCE + 100 * pace * MARGIN)


async def test_before_its_pace_is_known_a_serial_server_may_answer_calls_in_turn() -> None:
    """Three calls at once to a server that serves one at a time, 15 s each: the third answers at 45 s.
    Before any answer, each may wait 30 + 100 × 0.05 × 2 s per call in flight (60 s for three)."""
    clock = VirtualClock()
    server = LocalServer(clock, whole=15.0)
    turn = asyncio.Lock()

    async def one_at_a_time(request: ChatRequest) -> ChatResponse:
        watch = current_watch()
        assert watch is not None
        watch.sending(streaming=False)  # sent at once; the server queues it
        async with turn:
            await clock.sleep(15.0)
        return ChatResponse("done", usage=Usage(50, 100), model="m")

    server.complete = one_at_a_time  # type: ignore[method-assign]
    gw = gateway(clock, server)
    async with clock.auto_advance():
        answers = await asyncio.gather(*(gw.complete(f"s{i}", REQ) for i in range(3)))
    assert [a.content for a in answers] == ["done"] * 3 and clock.now() == 45.0


async def test_a_call_queued_at_a_serial_server_waits_while_the_server_answers_the_others() -> None:
    """Five calls at once, 30 s each, one at a time: the fifth answers at 150 s, past any first-wave
    limit (30 + 10 × 5 = 80 s), but each answer the server gives starts the others' wait again."""
    clock = VirtualClock()
    server = LocalServer(clock)
    turn = asyncio.Lock()

    async def one_at_a_time(request: ChatRequest) -> ChatResponse:
        watch = current_watch()
        assert watch is not None
        watch.sending(streaming=False)
        async with turn:
            await clock.sleep(30.0)
        return ChatResponse("done", usage=Usage(50, 100), model="m")

    server.complete = one_at_a_time  # type: ignore[method-assign]
    gw = gateway(clock, server)
    async with clock.auto_advance():
        answers = await asyncio.gather(*(gw.complete(f"s{i}", REQ) for i in range(5)))
    assert len(answers) == 5 and clock.now() == 150.0
    # a server that stops answering is still found: the queue does not move, the wait runs out
    server.complete = LocalServer(clock, every=1.0, silent=True).complete  # type: ignore[method-assign]
    async with clock.auto_advance():
        with pytest.raises(ProviderTimeout):
            await gw.complete("s9", REQ)
