"""The fakes agent_fleet.testing ships: each behaves as its port says, on exact values."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet import testing
from agent_fleet.clock import VirtualClock
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.errors import BudgetExhausted, Overloaded
from agent_fleet.hands.port import ToolOutput
from agent_fleet.testing.fakes import FakeGateway, FakeHands, FakeProvider, turn_of

REQ = ChatRequest(model="m", messages=[{"role": "user", "content": "go"}], max_tokens=10)


def test_the_package_exports_the_fakes() -> None:
    assert testing.FakeGateway is FakeGateway and testing.FakeHands is FakeHands
    assert testing.FakeProvider is FakeProvider and testing.VirtualClock is VirtualClock
    assert testing.MemorySessionLog.__name__ == "MemorySessionLog"
    with pytest.raises(AttributeError):
        _ = testing.Nothing  # type: ignore[attr-defined]


async def test_fake_gateway_scripts_holds_refuses_and_takes_its_latency() -> None:
    clock = VirtualClock()
    gw = FakeGateway(clock=clock, latency=2.0, replies=[Overloaded("busy", status=529)])
    async with clock.auto_advance():
        with pytest.raises(Overloaded):
            await gw.complete("s1", REQ)
        first = await gw.complete("s1", REQ)  # the default script: turn 1 submits a result
        assert [c.name for c in first.tool_calls] == ["submit_result"] and clock.now() == 4.0
        gw.hold["s2"] = asyncio.Event()
        held = asyncio.create_task(gw.complete("s2", REQ))
        await clock.until_idle()
        assert gw.sessions == ["s1", "s1", "s2"] and not held.done()  # in flight, held
        gw.hold["s2"].set()
        await held
    gw.refuse_after = 3
    with pytest.raises(BudgetExhausted):
        await gw.complete("s3", REQ)
    assert gw.refused == 1 and len(gw.calls) == 3
    assert repr(gw) == "FakeGateway(calls=3, refused=1, queued=0)"


async def test_fake_gateway_records_finishes_on_its_clock() -> None:
    clock = VirtualClock(start=7.0)
    gw = FakeGateway(clock=clock)
    done = ChatRequest(model="m", messages=[{"role": "user", "content": "go"}, {"role": "assistant", "content": ""}])
    assert turn_of(done) == 2
    reply = await gw.complete("s1", done)
    assert [c.name for c in reply.tool_calls] == ["finish"] and gw.finished_at == {"s1": 7.0}


async def test_fake_provider_runs_its_script_then_answers_ok() -> None:
    clock = VirtualClock()
    provider = FakeProvider(clock, latency=1.5, script=[ValueError("boom"), ChatResponse(content="scripted")])
    async with clock.auto_advance():
        with pytest.raises(ValueError):
            await provider.complete(REQ)
        assert (await provider.complete(REQ)).content == "scripted"
        assert (await asyncio.gather(provider.complete(REQ), provider.complete(REQ)))[0].content == "ok"
    assert (provider.calls, provider.peak, clock.now()) == (4, 2, 4.5)


async def test_fake_hands_run_scripted_tools_and_record_every_call() -> None:
    async def look(args: dict[str, object]) -> str:
        return f"looked at {args['path']}"

    hands = FakeHands({"echo": "same answer", "look": look, "fail": lambda _a: ToolOutput("no", is_error=True)})
    assert [s.name for s in hands.specs()] == ["echo", "fail", "look"]
    assert (await hands.execute("echo", {})).output == "same answer"
    assert (await hands.execute("look", {"path": "a.py"})).output == "looked at a.py"
    assert (await hands.execute("fail", {})).is_error
    unknown = await hands.execute("rm", {"path": "/"})
    assert unknown.is_error and "unknown tool" in unknown.output
    assert [name for name, _ in hands.executed] == ["echo", "look", "fail", "rm"]
    await hands.aclose()
    assert hands.closed == 1
