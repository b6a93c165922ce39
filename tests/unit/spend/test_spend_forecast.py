"""The pure forecast: ranges, the binding limit, the side-by-side with actuals."""

from __future__ import annotations

from decimal import Decimal

from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
from agent_fleet.spend.forecast import beside_actuals, forecast
from agent_fleet.spend.prices import PriceTable, Rates

PRICES = PriceTable(overrides={"m": Rates(input=Decimal(1), output=Decimal(4))})


def plan(n: int, tokens: int) -> Plan:
    parts = tuple(
        Partition(id=f"p{i}", index=i, kind=InputKind.LIST, items=(f"x{i}",), item_ids=(i,), est_tokens=tokens)
        for i in range(n)
    )
    return Plan(
        task="t",
        kind=InputKind.LIST,
        input_path=None,
        total_items=n,
        partitions=parts,
        root=PlanNode(id="root", est_tokens=n * tokens, items=n),
        budget_tokens=128_000,
    )


def test_one_session_figures_follow_the_formula():
    f = forecast(
        plan(1, 1_000),
        prices=PRICES,
        model="m",
        turns_low=2,
        turns_high=2,
        base_prompt_tokens=100,
        output_per_turn=10,
        latency=2.0,
    )
    # turn 1: 100 + 500 + 0 ; turn 2: 100 + 1000 + 10
    assert f.input_tokens == (1_710, 1_710)
    assert f.output_tokens == (20, 20)
    assert f.calls == (2, 2)
    assert f.cost_usd[0] == Decimal("0.0018")  # 1,710 × $1 + 20 × $4 per MTok = $0.00179
    assert f.wall_s == (4.0, 4.0)


def test_api_concurrency_binds_a_large_fleet():
    f = forecast(plan(1_000, 5_000), prices=PRICES, model="m", concurrency=50, latency=2.0)
    assert f.binding == "api_concurrency"
    assert f.calls == (4_000, 12_000)
    assert f.wall_s == (4_000 * 2.0 / 50, 12_000 * 2.0 / 50)
    assert f.cost_usd[0] < f.cost_usd[1]
    assert f.to_dict()["assumptions"]["latency_source"] == "observed"


def test_admission_and_budget_bind_when_they_are_tighter():
    f = forecast(plan(100, 5_000), prices=PRICES, model="m", concurrency=50, admission_slots=10)
    assert f.binding == "admission"
    assert f.assumptions["latency_source"] == "default"
    capped = forecast(plan(10, 200_000), prices=PRICES, model="m", budget_tokens=128_000)
    assert capped.binding == "budget" and capped.sessions_capped == 10
    assert capped.input_tokens[1] + capped.output_tokens[1] <= 10 * 128_000
    broke = forecast(plan(100, 5_000), prices=PRICES, model="m", fleet_budget_usd=Decimal("0.01"))
    assert broke.binding == "budget" and "fleet budget" in broke.reason


def test_forecast_beside_actuals():
    f = forecast(plan(10, 5_000), prices=PRICES, model="m", latency=1.0).to_dict()
    side = beside_actuals(f, {"llm_calls": 60, "tokens": {"total": 1}, "cost_usd": "0.5", "duration_s": 3})
    assert side["llm_calls"] == {"low": 40, "high": 120, "actual": 60, "within": True}
    assert side["tokens"]["within"] is False
