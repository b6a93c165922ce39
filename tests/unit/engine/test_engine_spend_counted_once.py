"""What a run's verification records as spent is what the gateway's meter charged its verifier
sessions — read from the meter, never added up again — including when the same run's verification
starts again on the same gateway (a resumed run in one process) and its session ids repeat."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from agent_fleet.clock import VirtualClock
from agent_fleet.config import FleetConfig, VerificationConfigModel
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.engine import RunOptions, plan_run
from agent_fleet.engine.verification import RunVerification
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.testing import FakeProvider, MemorySessionLog
from agent_fleet.testing.fakes import tool_call

PRICES = PriceTable(overrides={"m": Rates(input=Decimal(2), output=Decimal(8))})


def confirm(request: ChatRequest) -> ChatResponse:
    verdict = {"verdict": "confirm", "reason": "supported"}
    return ChatResponse(None, (tool_call("submit_verdict", verdict, "v"),), Usage(20, 5))


async def test_the_verification_records_the_meters_figures_once_per_engine(tmp_path: Path) -> None:
    clock = VirtualClock()
    items = tmp_path / "items.txt"
    items.write_text("".join(f"item {i}\n" for i in range(6)))
    plan = plan_run(RunOptions(task="Summarise each item", input_path=str(items), agents=6))
    results = [
        ResultItem(id=f"r{i}", partition_id=p.id, session_id=f"run-v.s{i}", title=f"r{i}", body="b")
        for i, p in enumerate(plan.partitions)
    ]
    provider = FakeProvider(clock=clock, latency=1.0, script=[confirm] * 12)
    gateway = Gateway(provider, clock=clock, adaptive=False, session_tokens=None, prices=PRICES)
    log = MemorySessionLog()
    await log.open()
    config = FleetConfig(verification=VerificationConfigModel(fraction=1.0, minimum=1, maximum=None, seed=3))

    def verification() -> RunVerification:
        return RunVerification(
            gateway=gateway, log=log, run_id="run-v", plan=plan, config=config, run_model="m", clock=clock,
            run_events=[],
        )  # fmt: skip

    async with clock.auto_advance():
        first = await verification().finish(results[:3], {r.id: r for r in results}.get)
        # the same run verified again by the same engine: its verifier session ids start again at v0000
        second = await verification().finish(results[3:], {r.id: r for r in results}.get)
    events = [e.data for e in await log.get_events("run-v") if e.type == EventType.VERIFICATION]
    assert [e["calls"] for e in events] == [3, 3] and provider.calls == 6
    one_call = Usage(20, 5)
    assert [Usage.from_dict(e["usage"]) for e in events] == [one_call + one_call + one_call] * 2
    assert [Decimal(e["cost_usd"]) for e in events] == [Decimal("0.00024")] * 2  # 3 × (20 × $2 + 5 × $8) / 1M
    assert first.summary["tokens"] == second.summary["tokens"] == 75
    # the meter holds both verifications under the same three session ids: each recorded only its own
    verifier = [t for sid, t in gateway.meter.sessions.items() if sid.startswith("run-v.v")]
    assert len(verifier) == 3 and sum(t.calls for t in verifier) == 6
    assert sum((t.cost_usd for t in verifier), Decimal(0)) == Decimal("0.00048")
