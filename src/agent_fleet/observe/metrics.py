"""The run's figures in Prometheus text format (SPEC.md, "Metrics").

``fleet_*`` families come from a :class:`FleetSnapshot` — plain numbers read off the gateway's
meter, the dispatcher's counts and the live deduplication — so rendering never touches the planes
themselves. Admission's families keep Kueue's names and come from the admission controller.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["FleetSnapshot", "ModelFigures", "metrics_key", "render"]


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
class FleetSnapshot:
    run_id: str
    models: Mapping[str, ModelFigures]
    concurrency_limit: int
    in_flight: int
    sessions: Mapping[str, int]  # state → count
    dedup_ratio: float | None = None
    results_raw: int = 0
    results_unique: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
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


def render(snapshot: FleetSnapshot, *, admission: bytes = b"") -> bytes:
    """Prometheus text: the fleet families, then admission's (Kueue's names)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_FleetCollector(snapshot))
    return generate_latest(registry) + admission
