"""The run's figures in Prometheus text format (SPEC.md, "Metrics").

``fleet_*`` families come from a :class:`FleetSnapshot` — plain numbers read off the gateway's
meter, the dispatcher's counts and the live deduplication — so rendering never touches the planes
themselves. Admission's families keep Kueue's names and come from the admission controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "CHECK_WAIT_BUCKETS",
    "CheckFigures",
    "FleetSnapshot",
    "ModelFigures",
    "check_figures",
    "metrics_key",
    "render",
]

# Seconds a check waited for its `fleet.dev/checks` admission (Kueue's own wait buckets, cut at an hour).
CHECK_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0)
_CHECK_OUTCOMES = ("passed", "failed", "timeout", "skipped")


def metrics_key(run_id: str) -> str:
    return f"metrics:{run_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFigures:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    errors: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckFigures:
    """A run's checks: how many ended in each outcome, and their admission waits as a histogram
    (``wait_buckets[i]`` counts the waits ≤ ``CHECK_WAIT_BUCKETS[i]``, cumulatively)."""

    outcomes: Mapping[str, int] = field(default_factory=dict)
    wait_buckets: tuple[int, ...] = ()
    wait_count: int = 0
    wait_sum: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcomes": dict(self.outcomes),
            "wait_buckets": list(self.wait_buckets),
            "wait_count": self.wait_count,
            "wait_sum": self.wait_sum,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckFigures:
        return cls(
            outcomes={str(k): int(v) for k, v in d.get("outcomes", {}).items()},
            wait_buckets=tuple(int(n) for n in d.get("wait_buckets", ())),
            wait_count=int(d.get("wait_count", 0)),
            wait_sum=float(d.get("wait_sum", 0.0)),
        )


def check_figures(checks: Iterable[Mapping[str, Any]]) -> CheckFigures:
    """The figures of recorded checks (``check`` events' data): the one place they are counted, for
    the live metrics, the final ones and the dashboard alike. A skipped check waited for nothing."""
    outcomes = dict.fromkeys(_CHECK_OUTCOMES, 0)
    waits: list[float] = []
    for data in checks:
        outcome = str(data.get("outcome", "failed"))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        wait = data.get("wait_s")
        if outcome != "skipped" and isinstance(wait, int | float):
            waits.append(max(0.0, float(wait)))
    buckets = tuple(sum(1 for w in waits if w <= le) for le in CHECK_WAIT_BUCKETS)
    return CheckFigures(outcomes=outcomes, wait_buckets=buckets, wait_count=len(waits), wait_sum=sum(waits))


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetSnapshot:
    run_id: str
    models: Mapping[str, ModelFigures]
    concurrency_limit: int
    in_flight: int
    sessions: Mapping[str, int]  # state → count
    dedup_ratio: float | None = None
    results_raw: int = 0
    results_unique: int = 0
    checks: CheckFigures | None = None  # with --check

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": None if self.checks is None else self.checks.to_dict(),
            "run_id": self.run_id,
            "models": {
                m: {
                    "input_tokens": f.input_tokens,
                    "output_tokens": f.output_tokens,
                    "cached_input_tokens": f.cached_input_tokens,
                    "calls": f.calls,
                    "cost_usd": f.cost_usd,
                    "errors": dict(f.errors),
                }
                for m, f in self.models.items()
            },
            "concurrency_limit": self.concurrency_limit,
            "in_flight": self.in_flight,
            "sessions": dict(self.sessions),
            "dedup_ratio": self.dedup_ratio,
            "results_raw": self.results_raw,
            "results_unique": self.results_unique,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FleetSnapshot:
        return cls(
            run_id=str(d["run_id"]),
            models={m: ModelFigures(**f) for m, f in d.get("models", {}).items()},
            concurrency_limit=int(d.get("concurrency_limit", 0)),
            in_flight=int(d.get("in_flight", 0)),
            sessions={str(k): int(v) for k, v in d.get("sessions", {}).items()},
            dedup_ratio=d.get("dedup_ratio"),
            results_raw=int(d.get("results_raw", 0)),
            results_unique=int(d.get("results_unique", 0)),
            checks=CheckFigures.from_dict(d["checks"]) if d.get("checks") else None,
        )


class _FleetCollector(Collector):
    def __init__(self, snap: FleetSnapshot) -> None:
        self._snap = snap

    def collect(self) -> Iterator[Any]:
        s = self._snap
        tokens = CounterMetricFamily("fleet_tokens", "Model tokens by model and kind.", labels=["run", "model", "kind"])
        cost = CounterMetricFamily("fleet_cost_usd", "List-price dollars spent.", labels=["run", "model"])
        requests = CounterMetricFamily(
            "fleet_llm_requests", "Model calls by model and outcome.", labels=["run", "model", "outcome"]
        )
        total_cost = 0.0
        for model, f in sorted(s.models.items()):
            for kind, value in (
                ("input", f.input_tokens - f.cached_input_tokens),
                ("cached_input", f.cached_input_tokens),
                ("output", f.output_tokens),
            ):
                tokens.add_metric([s.run_id, model, kind], value)
            cost.add_metric([s.run_id, model], f.cost_usd)
            total_cost += f.cost_usd
            requests.add_metric([s.run_id, model, "ok"], f.calls)
            for outcome, n in sorted(f.errors.items()):
                requests.add_metric([s.run_id, model, outcome], n)
        yield tokens
        yield cost
        yield requests
        limit = GaugeMetricFamily("fleet_api_concurrency_limit", "Concurrent model calls allowed now.", labels=["run"])
        limit.add_metric([s.run_id], s.concurrency_limit)
        yield limit
        in_flight = GaugeMetricFamily("fleet_llm_requests_in_flight", "Model calls on the wire.", labels=["run"])
        in_flight.add_metric([s.run_id], s.in_flight)
        yield in_flight
        sessions = GaugeMetricFamily("fleet_sessions", "Agent sessions by state.", labels=["run", "state"])
        for state, n in sorted(s.sessions.items()):
            sessions.add_metric([s.run_id, state], n)
        yield sessions
        results = CounterMetricFamily("fleet_results", "Result items, raw and unique.", labels=["run", "kind"])
        results.add_metric([s.run_id, "raw"], s.results_raw)
        results.add_metric([s.run_id, "unique"], s.results_unique)
        yield results
        if s.dedup_ratio is not None:
            dedup = GaugeMetricFamily("fleet_dedup_ratio", "Share of raw results that were duplicates.", labels=["run"])
            dedup.add_metric([s.run_id], s.dedup_ratio)
            yield dedup
        if s.checks is not None:
            yield from _check_families(s.run_id, s.checks)


def _check_families(run_id: str, c: CheckFigures) -> Iterator[Any]:
    checks = CounterMetricFamily("fleet_checks", "Checks of the run's changes by outcome.", labels=["run", "outcome"])
    for outcome, n in sorted(c.outcomes.items()):
        checks.add_metric([run_id, outcome], n)
    yield checks
    wait = HistogramMetricFamily(
        "fleet_check_admission_wait_seconds",
        "Time a check waited for its fleet.dev/checks admission.",
        labels=["run"],
    )
    cumulative = [(_le(le), float(n)) for le, n in zip(CHECK_WAIT_BUCKETS, c.wait_buckets, strict=False)]
    wait.add_metric([run_id], [*cumulative, ("+Inf", float(c.wait_count))], c.wait_sum)
    yield wait


def _le(bound: float) -> str:
    return repr(float(bound))


def render(snapshot: FleetSnapshot, *, admission: bytes = b"") -> bytes:
    """Prometheus text: the fleet families, then admission's (Kueue's names)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_FleetCollector(snapshot))
    return generate_latest(registry) + admission
