"""A request recorded without its response is charged at its reservation, once, before it is sent again."""

from __future__ import annotations

from agent_fleet.brain.harness import Harness, Outcome
from agent_fleet.brain.view import SessionView
from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.events import EventType
from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.usage import Usage
from agent_fleet.session.memory import MemorySessionLog, MemoryStore
from agent_fleet.spend.gateway import Gateway
from agent_fleet.testing.fakes import FakeHands, FakeProvider

SID = "run-x.s00000"
PROMPT = 50  # the gateway's prompt estimate, fixed
MAX_TOKENS = 100


async def crashed_with_call_in_flight(store: MemoryStore) -> MemorySessionLog:
    log = MemorySessionLog(store)
    await log.open()
    part = Partition("p0000", 0, InputKind.DIRECTORY, ("a.py",), (0,), 10)
    info = {"run_id": "run-x", "partition": part.to_dict(), "task": "Find bugs", "model": "m", "max_tokens": MAX_TOKENS}
    await log.emit_event(SID, EventType.SESSION_CREATED, info)
    await log.emit_event(SID, EventType.SESSION_STARTED, {"attempt": 1})
    await log.emit_event(SID, EventType.MODEL_REQUEST, {"turn": 1})  # sent; the engine died before the answer
    return log


def gateway(provider: FakeProvider, cap: int) -> Gateway:
    return Gateway(provider, session_tokens=cap, estimate_prompt=lambda _r: PROMPT)


def session_spent(gw: Gateway) -> int:
    acct = gw.book.find(AccountScope.SESSION, SID)
    assert acct is not None
    return acct.spent_tokens


async def resent(log: MemorySessionLog) -> list[dict[str, object]]:
    return [e.data for e in await log.get_events(SID) if e.type == EventType.MODEL_RESENT]


async def test_unanswered_request_is_charged_once_and_the_budget_sees_it() -> None:
    store = MemoryStore()
    log = await crashed_with_call_in_flight(store)
    reservation = PROMPT + MAX_TOKENS

    # a new engine: the lost send is charged at its reservation, which uses up a budget below it
    provider = FakeProvider(usage=Usage(70, 20))
    gw = gateway(provider, cap=reservation - 10)
    out = await Harness(log=log, gateway=gw, hands=FakeHands()).run(SID, attempt=2)
    assert out.outcome is Outcome.PAUSED and out.reason == "budget"
    assert provider.calls == 0  # refused before it was sent again
    assert [(d["turn"], d["tokens"], d["usage"]) for d in await resent(log)] == [
        (1, reservation, Usage(PROMPT, MAX_TOKENS).to_dict())
    ]
    assert session_spent(gw) == reservation
    assert gw.book.run.spent_tokens == reservation

    # another engine, the budget raised: the refused send was never sent, so nothing more is charged
    provider = FakeProvider(usage=Usage(70, 20))
    gw = gateway(provider, cap=10_000)
    out = await Harness(log=log, gateway=gw, hands=FakeHands()).run(SID, attempt=3)
    assert out.outcome is Outcome.COMPLETED
    assert provider.calls == 1
    assert len(await resent(log)) == 1
    assert session_spent(gw) == reservation + 90  # the charged send, then the real answer
    view = SessionView.from_events(await log.get_events(SID))
    assert (view.resent_calls, view.resent_usage.total_tokens, view.usage.total_tokens) == (1, reservation, 90)


async def test_every_lost_send_is_charged_after_repeated_crashes() -> None:
    log = await crashed_with_call_in_flight(MemoryStore())
    events = list(await log.get_events(SID))
    view = SessionView.from_events(events)
    assert view.unbilled_send
    # wake charged it and sent it again; that send was lost too: the next wake charges it again
    charge = {"turn": 1, "usage": Usage(PROMPT, MAX_TOKENS).to_dict(), "tokens": PROMPT + MAX_TOKENS, "cost_usd": "0"}
    more = await log.emit_events(SID, [(EventType.SESSION_RESUMED, {}), (EventType.MODEL_RESENT, charge)])
    view = SessionView.from_events([*events, *more])
    assert view.unbilled_send and view.resent_calls == 1
    provider = FakeProvider(usage=Usage(70, 20))
    gw = gateway(provider, cap=10_000)
    assert (await Harness(log=log, gateway=gw, hands=FakeHands()).run(SID, attempt=3)).outcome is Outcome.COMPLETED
    assert len(await resent(log)) == 2
    assert session_spent(gw) == 2 * (PROMPT + MAX_TOKENS) + 90  # two lost sends, then the answer


async def test_a_send_answered_with_an_error_is_not_charged() -> None:
    log = await crashed_with_call_in_flight(MemoryStore())
    await log.emit_event(SID, EventType.MODEL_ERROR, {"turn": 1, "error": "overloaded", "status": 529})
    view = SessionView.from_events(await log.get_events(SID))
    assert view.pending_turn == 1 and not view.unbilled_send
    gw = gateway(FakeProvider(usage=Usage(70, 20)), cap=10_000)
    assert (await Harness(log=log, gateway=gw, hands=FakeHands()).run(SID, attempt=2)).outcome is Outcome.COMPLETED
    assert await resent(log) == []
    assert session_spent(gw) == 90
