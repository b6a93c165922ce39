"""Forecast a run from its plan before spending anything (``deploy --dry-run``, ``estimate``).

A session of ``turns`` model calls re-sends its growing context each turn::

    input(session)  = turns × base + partition × (turns + 1) / 2 + output_per_turn × turns × (turns − 1) / 2
    output(session) = turns × output_per_turn

capped at the per-session token budget (a session that would cross it pauses there). The range takes
``turns`` from ``turns_low`` to ``turns_high``. Wall time: the calls of the fleet spread over
``min(API concurrency, admission slots, sessions)`` parallel streams at the given latency per call,
and never faster than a tokens-per-minute limit allows. The limit that binds is the one that sets
the wall time or stops the run: the API concurrency, the admission quota, or a budget.
Pure: every figure comes in as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.plan import Plan
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.prices import PriceTable

__all__ = ["DEFAULT_LATENCY_S", "Forecast", "beside_actuals", "forecast"]

DEFAULT_LATENCY_S = 4.0  # a stated default when no latency has been observed yet


@dataclass(frozen=True, slots=True)
class Forecast:
    sessions: int
    model: str
    calls: tuple[int, int]
    input_tokens: tuple[int, int]
    output_tokens: tuple[int, int]
    cost_usd: tuple[Decimal, Decimal]
    wall_s: tuple[float, float]
    binding: str  # "api_concurrency" | "admission" | "budget" | "tokens_per_minute" | "sessions"
    reason: str
    sessions_capped: int  # sessions whose high estimate crosses the per-session token budget
    assumptions: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> tuple[int, int]:
        return self.input_tokens[0] + self.output_tokens[0], self.input_tokens[1] + self.output_tokens[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "model": self.model,
            "llm_calls": {"low": self.calls[0], "high": self.calls[1]},
            "tokens": {
                "input": {"low": self.input_tokens[0], "high": self.input_tokens[1]},
                "output": {"low": self.output_tokens[0], "high": self.output_tokens[1]},
                "total": {"low": self.total_tokens[0], "high": self.total_tokens[1]},
            },
            "cost_usd": {"low": str(self.cost_usd[0]), "high": str(self.cost_usd[1])},
            "wall_s": {"low": round(self.wall_s[0], 1), "high": round(self.wall_s[1], 1)},
            "binding": self.binding,
            "reason": self.reason,
            "sessions_capped": self.sessions_capped,
            "assumptions": self.assumptions,
        }


def _session(partition_tokens: int, turns: int, base: int, out_per_turn: int, cap: int | None) -> tuple[int, int, int]:
    """(input, output, calls) of one session, stopped at the token cap."""
    inp = out = calls = 0
    for t in range(1, turns + 1):
        prompt = base + partition_tokens * t // turns + out_per_turn * (t - 1)
        if cap is not None and inp + out + prompt + out_per_turn > cap:
            break
        inp += prompt
        out += out_per_turn
        calls += 1
    return inp, out, calls


def forecast(
    plan: Plan,
    *,
    prices: PriceTable,
    model: str,
    concurrency: int = 50,
    latency: float | None = None,
    budget_tokens: int | None = 128_000,
    budget_usd: Decimal | None = None,
    fleet_budget_usd: Decimal | None = None,
    admission_slots: int | None = None,
    tokens_per_minute: float | None = None,
    turns_low: int = 4,
    turns_high: int = 12,
    base_prompt_tokens: int = 1_200,
    output_per_turn: int = 400,
) -> Forecast:
    lat = DEFAULT_LATENCY_S if latency is None else latency
    rates = prices.rates(model)
    n = len(plan.partitions)
    lows: list[tuple[int, int, int]] = []
    highs: list[tuple[int, int, int]] = []
    capped = 0
    for p in plan.partitions:
        lows.append(_session(p.est_tokens, turns_low, base_prompt_tokens, output_per_turn, budget_tokens))
        hi = _session(p.est_tokens, turns_high, base_prompt_tokens, output_per_turn, budget_tokens)
        if hi[2] < turns_high:
            capped += 1
        highs.append(hi)

    def cost_of(sessions: list[tuple[int, int, int]]) -> Decimal:
        total = Decimal(0)
        for inp, out, _ in sessions:
            c = rates.cost(Usage(inp, out))
            total += min(c, budget_usd) if budget_usd is not None else c
        return total

    cost = (cost_of(lows), cost_of(highs))
    calls = (sum(s[2] for s in lows), sum(s[2] for s in highs))
    inp = (sum(s[0] for s in lows), sum(s[0] for s in highs))
    out = (sum(s[1] for s in lows), sum(s[1] for s in highs))

    streams = {"api_concurrency": concurrency, "sessions": max(1, n)}
    if admission_slots is not None:
        streams["admission"] = admission_slots
    binding = min(streams, key=lambda k: (streams[k], k != "api_concurrency"))
    parallel = max(1, streams[binding])
    # A session's calls are sequential: the wall time is at least its own turns × latency.
    wall = [max(c * lat / parallel, t * lat) for c, t in ((calls[0], turns_low), (calls[1], turns_high))]
    reason = f"{parallel} parallel calls ({binding.replace('_', ' ')}) at {lat:g} s per call"
    if tokens_per_minute:
        tpm_wall = [(i + o) / tokens_per_minute * 60 for i, o in zip(inp, out, strict=True)]
        if tpm_wall[1] > wall[1]:
            binding, reason = "tokens_per_minute", f"{tokens_per_minute:,.0f} tokens/min"
        wall = [max(w, t) for w, t in zip(wall, tpm_wall, strict=True)]
    if fleet_budget_usd is not None and cost[1] > fleet_budget_usd:
        binding = "budget"
        reason = f"the fleet budget ${fleet_budget_usd} is below the high estimate ${cost[1]:.2f}: the run may pause"
    elif capped and capped * 2 >= max(1, n):
        binding = "budget"
        reason = f"{capped} of {n} sessions would reach the {budget_tokens:,}-token session budget"
    return Forecast(
        sessions=n,
        model=model,
        calls=calls,
        input_tokens=inp,
        output_tokens=out,
        cost_usd=(cost[0].quantize(Decimal("0.0001")), cost[1].quantize(Decimal("0.0001"))),
        wall_s=(wall[0], wall[1]),
        binding=binding,
        reason=reason,
        sessions_capped=capped,
        assumptions={
            "latency_s": lat,
            "latency_source": "observed" if latency is not None else "default",
            "turns": [turns_low, turns_high],
            "base_prompt_tokens": base_prompt_tokens,
            "output_per_turn": output_per_turn,
            "concurrency": concurrency,
            "admission_slots": admission_slots,
            "prices_known": rates.known,
        },
    )


def beside_actuals(forecast_dict: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The forecast's ranges next to a finished run's figures (for summary.json / the report)."""

    def row(low: Any, high: Any, actual: Any) -> dict[str, Any]:
        try:
            inside = float(low) <= float(actual) <= float(high)
        except (TypeError, ValueError):
            inside = None
        return {"low": low, "high": high, "actual": actual, "within": inside}

    f = forecast_dict
    tokens = summary.get("tokens") or {}
    return {
        "llm_calls": row(f["llm_calls"]["low"], f["llm_calls"]["high"], summary.get("llm_calls")),
        "tokens": row(f["tokens"]["total"]["low"], f["tokens"]["total"]["high"], tokens.get("total")),
        "cost_usd": row(f["cost_usd"]["low"], f["cost_usd"]["high"], summary.get("cost_usd")),
        "wall_s": row(f["wall_s"]["low"], f["wall_s"]["high"], summary.get("duration_s")),
        "binding": f.get("binding"),
    }
