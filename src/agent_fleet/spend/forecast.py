"""Forecast a run from its plan before spending anything (``deploy --dry-run``, ``estimate``).

A session of ``turns`` model calls re-sends its growing context each turn::

    input(session)  = turns × base + partition × (turns + 1) / 2 + output_per_turn × turns × (turns − 1) / 2
    output(session) = turns × output_per_turn

capped at the per-session token budget (a session that would cross it pauses there). The range takes
``turns`` from ``turns_low`` to ``turns_high``: that is the *default prior*. Once the store holds
finished sessions of the same task type and model, a *learned prior* replaces it (:func:`fit_prior`):
per session, calls, input and output tokens as a straight line in the partition's size, fitted on
those sessions, the range their spread around the line. Wall time: the calls of the fleet spread over
``min(API concurrency, admission slots, sessions)`` parallel streams at the given latency per call,
and never faster than a tokens-per-minute limit allows. The limit that binds is the one that sets
the wall time or stops the run: the API concurrency, the admission quota, or a budget.
Pure: every figure comes in as an argument.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.plan import Plan
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.prices import PriceTable, Rates

__all__ = ["DEFAULT_LATENCY_S", "Forecast", "Line", "Prior", "SessionSample", "beside_actuals", "fit_prior", "forecast"]

DEFAULT_LATENCY_S = 4.0  # a stated default when no latency has been observed yet
MIN_SPREAD = 0.10  # a learned range is never narrower than ±10 %
Session = tuple[int, int, float]  # one session's input tokens, output tokens, calls


@dataclass(frozen=True, slots=True)
class SessionSample:
    """What one finished session of an earlier run took, beside the size its partition was planned at."""

    partition_tokens: int
    calls: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Line:
    """``y = intercept + slope × partition tokens``, never below ``floor``."""

    intercept: float
    slope: float
    floor: float = 0.0

    def at(self, x: int) -> float:
        return max(self.floor, self.intercept + self.slope * x)

    @classmethod
    def fit(cls, xs: Sequence[int], ys: Sequence[float], floor: float = 0.0) -> Line:
        """Least squares; with one size only (or one sample), the mean at any size."""
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        if sxx == 0:
            return cls(my, 0.0, floor)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
        return cls(my - slope * mx, slope, floor)


@dataclass(frozen=True, slots=True)
class Prior:
    """Per-session figures learned from earlier runs of one task type and model."""

    task_type: str
    model: str
    runs: tuple[str, ...]
    sessions: int
    calls: Line
    input_tokens: Line
    output_tokens: Line
    spread: float  # relative: the 90th percentile of |actual − fit| / fit of a session's total tokens
    call_spread: float  # the same for a session's calls
    run_overhead: tuple[float, float, float] = (0.0, 0.0, 0.0)  # per run, beside its sessions: calls, in, out

    def describe(self) -> dict[str, Any]:
        return {
            "source": "learned",
            "task_type": self.task_type,
            "model": self.model,
            "runs": list(self.runs),
            "sessions": self.sessions,
            "spread": round(self.spread, 3),
            "call_spread": round(self.call_spread, 3),
            "per_run": {"llm_calls": round(self.run_overhead[0], 1), "tokens": round(sum(self.run_overhead[1:]))},
        }


def _p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def fit_prior(
    samples: Sequence[SessionSample],
    *,
    task_type: str,
    model: str,
    runs: Sequence[str],
    overhead: Sequence[tuple[int, int, int]] = (),
) -> Prior | None:
    """A learned prior from finished sessions, or None when there are none. ``overhead``: per earlier
    run, the calls, input and output tokens it spent outside its sessions (verification, embeddings)."""
    if not samples:
        return None
    xs = [s.partition_tokens for s in samples]
    calls = Line.fit(xs, [s.calls for s in samples], floor=1.0)
    inp = Line.fit(xs, [s.input_tokens for s in samples])
    out = Line.fit(xs, [s.output_tokens for s in samples])
    token_errors = [
        abs(s.input_tokens + s.output_tokens - (inp.at(x) + out.at(x))) / max(1.0, inp.at(x) + out.at(x))
        for s, x in zip(samples, xs, strict=True)
    ]
    call_errors = [abs(s.calls - calls.at(x)) / calls.at(x) for s, x in zip(samples, xs, strict=True)]
    per_run = tuple(statistics.fmean(col) for col in zip(*overhead, strict=True)) if overhead else (0.0, 0.0, 0.0)
    return Prior(
        task_type=task_type,
        model=model,
        runs=tuple(runs),
        sessions=len(samples),
        calls=calls,
        input_tokens=inp,
        output_tokens=out,
        spread=max(MIN_SPREAD, _p90(token_errors)),
        call_spread=max(MIN_SPREAD, _p90(call_errors)),
        run_overhead=(per_run[0], per_run[1], per_run[2]),
    )


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
    expected_calls: int = 0
    expected_tokens: int = 0
    prior: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> tuple[int, int]:
        return self.input_tokens[0] + self.output_tokens[0], self.input_tokens[1] + self.output_tokens[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "model": self.model,
            "llm_calls": {"low": self.calls[0], "high": self.calls[1], "expected": self.expected_calls},
            "tokens": {
                "input": {"low": self.input_tokens[0], "high": self.input_tokens[1]},
                "output": {"low": self.output_tokens[0], "high": self.output_tokens[1]},
                "total": {"low": self.total_tokens[0], "high": self.total_tokens[1], "expected": self.expected_tokens},
            },
            "cost_usd": {"low": str(self.cost_usd[0]), "high": str(self.cost_usd[1])},
            "wall_s": {"low": round(self.wall_s[0], 1), "high": round(self.wall_s[1], 1)},
            "binding": self.binding,
            "reason": self.reason,
            "sessions_capped": self.sessions_capped,
            "assumptions": self.assumptions,
            "prior": self.prior,
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
    prior: Prior | None = None,
) -> Forecast:
    lat = DEFAULT_LATENCY_S if latency is None else latency
    rates = prices.rates(model)
    n = len(plan.partitions)
    lows, expected, highs, capped = _sessions(
        plan, prior, budget_tokens, turns_low, turns_high, base_prompt_tokens, output_per_turn
    )

    sequential = (max((s[2] for s in lows), default=0.0), max((s[2] for s in highs), default=0.0))
    if prior is not None and prior.run_overhead != (0.0, 0.0, 0.0):  # verification, embeddings
        extra = (round(prior.run_overhead[1]), round(prior.run_overhead[2]), prior.run_overhead[0])
        lows, expected, highs = [*lows, extra], [*expected, extra], [*highs, extra]

    cost = (_cost_of(lows, rates, budget_usd), _cost_of(highs, rates, budget_usd))
    calls = (round(sum(s[2] for s in lows)), round(sum(s[2] for s in highs)))
    inp = (sum(s[0] for s in lows), sum(s[0] for s in highs))
    out = (sum(s[1] for s in lows), sum(s[1] for s in highs))

    # A session's calls are sequential: the wall time is at least its own turns × latency.
    longest = (turns_low, turns_high) if prior is None else sequential
    wall, binding, reason = _wall_time(
        calls, inp, out, longest, lat, concurrency, n, admission_slots, tokens_per_minute
    )
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
            "turns": [turns_low, turns_high] if prior is None else None,
            "base_prompt_tokens": base_prompt_tokens if prior is None else None,
            "output_per_turn": output_per_turn if prior is None else None,
            "concurrency": concurrency,
            "admission_slots": admission_slots,
            "prices_known": rates.known,
        },
        expected_calls=round(sum(e[2] for e in expected)),
        expected_tokens=sum(e[0] + e[1] for e in expected),
        prior=prior.describe() if prior is not None else _default_prior(turns_low, turns_high),
    )


def _sessions(
    plan: Plan,
    prior: Prior | None,
    budget_tokens: int | None,
    turns_low: int,
    turns_high: int,
    base_prompt_tokens: int,
    output_per_turn: int,
) -> tuple[list[Session], list[Session], list[Session], int]:
    """Each partition's session at its low, expected and high estimate, and how many reach the budget."""
    lows: list[Session] = []
    highs: list[Session] = []
    expected: list[Session] = []
    capped = 0
    for p in plan.partitions:
        if prior is not None:
            lo, mid, hi, over = _learned_session(prior, p.est_tokens, budget_tokens)
            capped += over
            lows.append(lo)
            expected.append(mid)
            highs.append(hi)
            continue
        lows.append(_session(p.est_tokens, turns_low, base_prompt_tokens, output_per_turn, budget_tokens))
        hi = _session(p.est_tokens, turns_high, base_prompt_tokens, output_per_turn, budget_tokens)
        if hi[2] < turns_high:
            capped += 1
        highs.append(hi)
        expected.append(((lows[-1][0] + hi[0]) // 2, (lows[-1][1] + hi[1]) // 2, (lows[-1][2] + hi[2]) / 2))
    return lows, expected, highs, capped


def _cost_of(sessions: list[Session], rates: Rates, budget_usd: Decimal | None) -> Decimal:
    total = Decimal(0)
    for inp, out, _ in sessions:
        c = rates.cost(Usage(inp, out))
        total += min(c, budget_usd) if budget_usd is not None else c
    return total


def _wall_time(
    calls: tuple[int, int],
    inp: tuple[int, int],
    out: tuple[int, int],
    longest: tuple[float, float],
    lat: float,
    concurrency: int,
    sessions: int,
    admission_slots: int | None,
    tokens_per_minute: float | None,
) -> tuple[list[float], str, str]:
    """The low and high wall time, the limit that binds it, and why."""
    streams = {"api_concurrency": concurrency, "sessions": max(1, sessions)}
    if admission_slots is not None:
        streams["admission"] = admission_slots
    binding = min(streams, key=lambda k: (streams[k], k != "api_concurrency"))
    parallel = max(1, streams[binding])
    wall = [max(c * lat / parallel, t * lat) for c, t in zip(calls, longest, strict=True)]
    reason = f"{parallel} parallel calls ({binding.replace('_', ' ')}) at {lat:g} s per call"
    if tokens_per_minute:
        tpm_wall = [(i + o) / tokens_per_minute * 60 for i, o in zip(inp, out, strict=True)]
        if tpm_wall[1] > wall[1]:
            binding, reason = "tokens_per_minute", f"{tokens_per_minute:,.0f} tokens/min"
        wall = [max(w, t) for w, t in zip(wall, tpm_wall, strict=True)]
    return wall, binding, reason


def _default_prior(turns_low: int, turns_high: int) -> dict[str, Any]:
    return {"source": "default", "turns": [turns_low, turns_high], "why": "no finished run of this task type and model"}


def _learned_session(prior: Prior, partition_tokens: int, cap: int | None) -> tuple[Session, Session, Session, int]:
    """(low, expected, high) of one session, and 1 if the cap cuts its high estimate."""
    calls = prior.calls.at(partition_tokens)
    inp, out = prior.input_tokens.at(partition_tokens), prior.output_tokens.at(partition_tokens)

    def scaled(sign: int) -> Session:
        f, g = 1 + sign * prior.spread, 1 + sign * prior.call_spread
        i, o, c = inp * f, out * f, calls * g
        if cap is not None and i + o > cap:  # the session pauses at its budget
            cut = cap / (i + o)
            i, o, c = i * cut, o * cut, c * cut
        return round(i), round(o), max(1.0, c)

    over = int(cap is not None and (inp + out) * (1 + prior.spread) > cap)
    return scaled(-1), scaled(0), scaled(1), over


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
