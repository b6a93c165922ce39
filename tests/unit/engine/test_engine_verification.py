"""A run's verification started before its last result: judged ahead only in capacity the run's own
sessions will not ask for, and the sample stays the seeded draw of the *final* unique results."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent_fleet.aggregate.verify import sample_for_verification, sample_key
from agent_fleet.clock import VirtualClock
from agent_fleet.config import FleetConfig, VerificationConfigModel
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.plan import Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.engine import RunOptions, plan_run
from agent_fleet.engine.verification import RunVerification
from agent_fleet.spend.gateway import Gateway
from agent_fleet.testing import FakeProvider, MemorySessionLog
from agent_fleet.testing.fakes import tool_call

CAP = 4
SEED = 7


def confirm(request: ChatRequest) -> ChatResponse:
    verdict = {"verdict": "confirm", "reason": "supported"}
    return ChatResponse(None, (tool_call("submit_verdict", verdict, "v"),), Usage(20, 5))


def judged(request: ChatRequest) -> str:
    """The id of the result a verifier request is about (its title is the id, below)."""
    body = str(request.messages[1]["content"])
    return body.split("Title: ", 1)[1].split("\n", 1)[0]


class Bench:
    def __init__(self, tmp_path: Path, clock: VirtualClock, n: int, *, fraction: float = 0.1) -> None:
        items = tmp_path / "items.txt"
        items.write_text("".join(f"item {i}\n" for i in range(n)))
        self.plan: Plan = plan_run(RunOptions(task="Summarise each item", input_path=str(items), agents=n))
        self.results = [
            ResultItem(id=f"r{i:04d}", partition_id=p.id, session_id=f"run-v.s{i:05d}", title=f"r{i:04d}", body="b")
            for i, p in enumerate(self.plan.partitions)
        ]
        self.provider = FakeProvider(clock=clock, latency=1.0, script=[confirm] * (4 * n))
        self.gateway = Gateway(self.provider, clock=clock, concurrency=CAP, adaptive=False, session_tokens=None)
        self.log = MemorySessionLog()
        settings = VerificationConfigModel(fraction=fraction, minimum=1, maximum=None, seed=SEED)
        self.config = FleetConfig(verification=settings)
        self.clock = clock

    def verification(self, run_events: list[object] | None = None) -> RunVerification:
        return RunVerification(
            gateway=self.gateway,
            log=self.log,
            run_id="run-v",
            plan=self.plan,
            config=self.config,
            run_model="gpt-4.1-mini",
            clock=self.clock,
            run_events=run_events or [],  # type: ignore[arg-type]
        )

    def sample(self, unique: list[ResultItem]) -> list[str]:
        return [r.id for r in sample_for_verification(unique, fraction=0.1, minimum=1, seed=SEED)]

    def asked(self, since: int = 0) -> list[str]:
        return [judged(r) for r in self.provider_requests[since:]]

    @property
    def provider_requests(self) -> list[ChatRequest]:
        return self._requests

    def record_requests(self) -> None:
        self._requests: list[ChatRequest] = []
        inner = self.provider.complete

        async def complete(request: ChatRequest) -> ChatResponse:
            self._requests.append(request)
            return await inner(request)

        self.provider.complete = complete  # type: ignore[method-assign]


async def test_nothing_is_judged_ahead_while_the_sessions_need_every_slot(tmp_path: Path) -> None:
    clock = VirtualClock()
    bench = Bench(tmp_path, clock, 100)
    bench.record_requests()
    await bench.log.open()
    v = bench.verification()
    demand = [CAP]
    v.demand = lambda: demand[0]
    v.offer(bench.results)  # every result is in; the sessions still hold every slot
    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(v.run())
        await clock.sleep(5.0)
        assert bench.provider.calls == 0
        demand[0] = CAP - 1  # one slot the sessions will not ask for: one call at a time
        await clock.sleep(3.0)
        assert bench.provider.peak == 1 and 2 <= bench.provider.calls <= 3
        demand[0] = 0
        await clock.sleep(5.0)
        # exactly the sample, smallest key first
        sample = bench.sample(bench.results)
        assert bench.asked() == sorted(sample, key=lambda rid: sample_key(SEED, rid))
        outcome = await v.finish(bench.results, {r.id: r for r in bench.results}.get)
    assert bench.provider.calls == len(sample) == 10  # the final step judged nothing again
    assert outcome.summary["sampled"] == outcome.summary["judged"] == 10 and outcome.summary["calls"] == 10
    (event,) = [e for e in await bench.log.get_events("run-v") if e.type == EventType.VERIFICATION]
    assert event.data["calls"] == 10 and event.data["outside_sample"] == 0
    assert sorted(event.data["verdicts"]) == sorted(sample)


async def test_the_sample_is_the_final_unique_results_draw_whatever_was_judged_ahead(tmp_path: Path) -> None:
    clock = VirtualClock()
    bench = Bench(tmp_path, clock, 200)
    bench.record_requests()
    await bench.log.open()
    v = bench.verification()
    v.progress = lambda: 0.5  # half the sessions ended: 100 results offered of 200 projected
    first_half, second_half = bench.results[:100], bench.results[100:]
    v.offer(first_half)
    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(v.run())
        await clock.sleep(10.0)
        ahead = bench.asked()
        # the sample's share of what is in is 20 of 200 projected: 10 of the 100, drawn three standard
        # deviations short (1 - 3 * sqrt(0.5 / 10) of them): the 3 smallest keys
        assert ahead == sorted((r.id for r in first_half), key=lambda rid: sample_key(SEED, rid))[:3]
        # two of them merge into other results in the final pass: they are not unique any more
        unique = [r for r in bench.results if r.id not in ahead[:2]]
        v.progress = lambda: 1.0
        v.offer(second_half)
        outcome = await v.finish(unique, {r.id: r for r in bench.results}.get)
    sample = bench.sample(unique)
    assert len(sample) == 20 and not set(ahead[:2]) & set(sample)
    summary = outcome.summary
    assert summary["sampled"] == summary["judged"] == 20
    annotated = {r.id for r in outcome.results if "verification" in r.extra}
    assert annotated == set(sample)  # the report shows the sample only
    assert summary["calls"] == bench.provider.calls == 3 + len(set(sample) - set(ahead))  # every call counted
    (event,) = [e for e in await bench.log.get_events("run-v") if e.type == EventType.VERIFICATION]
    assert sorted(event.data["verdicts"]) == sorted(sample)
    assert event.data["outside_sample"] == len(set(ahead) - set(sample)) >= 2


async def test_verdicts_recorded_earlier_are_not_paid_for_again(tmp_path: Path) -> None:
    clock = VirtualClock()
    bench = Bench(tmp_path, clock, 50)
    await bench.log.open()
    sample = bench.sample(bench.results)
    earlier = {rid: {"status": "confirm", "reason": "seen before", "verifier": "m"} for rid in sample[:3]}
    await bench.log.emit_event(
        "run-v",
        EventType.VERIFICATION,
        {"report": None, "verdicts": earlier, "skipped": {}, "model": "m", "calls": 3, "usage": {}, "cost_usd": "0"},
    )
    v = bench.verification(list(await bench.log.get_events("run-v")))
    async with clock.auto_advance():
        outcome = await v.finish(bench.results, {r.id: r for r in bench.results}.get)
    assert bench.provider.calls == len(sample) - 3
    assert outcome.summary["judged"] == len(sample) and outcome.summary["calls"] == len(sample)  # 3 earlier
    reasons = {r.id: r.extra["verification"]["reason"] for r in outcome.results if "verification" in r.extra}
    assert [reasons[rid] for rid in sample[:3]] == ["seen before"] * 3


async def test_a_run_that_ends_without_a_report_records_what_it_judged_ahead(tmp_path: Path) -> None:
    clock = VirtualClock()
    bench = Bench(tmp_path, clock, 100)
    await bench.log.open()
    v = bench.verification()
    v.offer(bench.results)
    async with clock.auto_advance(), asyncio.TaskGroup() as tg:
        tg.create_task(v.run())
        await clock.sleep(0.5)  # four calls in flight
        assert bench.provider.active == CAP
        await v.abandon()  # no new call; those in flight land and are recorded
        assert clock.now() == 1.0
    (event,) = [e for e in await bench.log.get_events("run-v") if e.type == EventType.VERIFICATION]
    assert event.data["report"] is None and event.data["calls"] == CAP == len(event.data["verdicts"])
    assert json.dumps(event.data)  # plain JSON


async def test_once_the_sample_is_known_every_spare_slot_is_used_even_when_not_judging_ahead(tmp_path: Path) -> None:
    """After the run's last session (no judging ahead any more) the sample goes out in every slot
    nobody wants, not only ``concurrency`` (8) at a time."""
    clock = VirtualClock()
    bench = Bench(tmp_path, clock, 200)
    bench.gateway.set_concurrency(20)
    await bench.log.open()
    v = bench.verification()
    v.ahead = lambda: False
    v.offer(bench.results)
    async with clock.auto_advance():
        outcome = await v.finish(bench.results, {r.id: r for r in bench.results}.get)
    assert outcome.summary["judged"] == 20
    assert bench.provider.peak == 20 > v.config.concurrency
