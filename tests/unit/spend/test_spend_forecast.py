"""The pure forecast: ranges, the binding limit, the side-by-side with actuals."""

from __future__ import annotations

from decimal import Decimal

from agent_fleet.domain.plan import InputKind, Partition, Plan, PlanNode
from agent_fleet.spend.forecast import SessionSample, beside_actuals, fit_prior, forecast
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


def test_a_learned_prior_is_a_line_in_the_partition_size_and_its_spread():
    # sessions of 1,000 and 3,000 planned tokens took 2 and 4 calls; their tokens grow the same way
    samples = [
        SessionSample(partition_tokens=1_000, calls=2, input_tokens=3_000, output_tokens=500),
        SessionSample(partition_tokens=3_000, calls=4, input_tokens=9_000, output_tokens=1_500),
    ]
    prior = fit_prior(samples, task_type="other", model="m", runs=["r1"], overhead=[(5, 1_000, 100)])
    assert prior is not None
    assert prior.calls.at(2_000) == 3.0 and prior.input_tokens.at(2_000) == 6_000
    assert prior.spread == 0.10 and prior.call_spread == 0.10  # an exact fit: the floor of the range
    f = forecast(plan(2, 2_000), prices=PRICES, model="m", prior=prior, latency=1.0)
    # two sessions of 3 calls, 6,000 + 1,000 tokens each, and the run's own 5 calls (verification)
    assert f.expected_calls == 2 * 3 + 5 and f.expected_tokens == 2 * 7_000 + 1_100
    assert f.calls == (round(2 * 2.7 + 5), round(2 * 3.3 + 5))
    assert f.input_tokens == (2 * 5_400 + 1_000, 2 * 6_600 + 1_000)
    assert f.wall_s[0] == 10 * 1.0 / 2  # ten calls over two parallel streams at 1 s
    assert f.to_dict()["prior"] == prior.describe() and prior.describe()["source"] == "learned"


def test_a_learned_session_stops_at_its_budget_and_no_samples_leave_the_default():
    samples = [SessionSample(partition_tokens=500, calls=10, input_tokens=90_000, output_tokens=10_000)]
    prior = fit_prior(samples, task_type="other", model="m", runs=["r1"])
    assert prior is not None and prior.calls.slope == 0.0  # one size only: the mean at every size
    f = forecast(plan(1, 800), prices=PRICES, model="m", prior=prior, budget_tokens=50_000)
    assert f.input_tokens[1] + f.output_tokens[1] <= 50_001 and f.sessions_capped == 1
    assert fit_prior([], task_type="other", model="m", runs=[]) is None
    default = forecast(plan(1, 800), prices=PRICES, model="m").to_dict()
    assert default["prior"]["source"] == "default"
    assert default["llm_calls"]["expected"] == (default["llm_calls"]["low"] + default["llm_calls"]["high"]) // 2
