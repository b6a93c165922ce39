"""SimConfig validation and its JSON round trip."""

from __future__ import annotations

import random

import pytest

from agent_fleet.errors import UsageError
from agent_fleet.sim.provider import build_config
from agent_fleet.sim.settings import FixedLatency, LogNormalLatency, SimConfig, UniformLatency


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate_429": 1.5},
        {"rate_500": -0.1},
        {"rate_429": 0.6, "rate_503": 0.6},
        {"max_concurrency": 0},
        {"rpm": 0},
        {"latency": -1.0},
        {"latency": UniformLatency(low=2.0, high=1.0)},
        {"verifier_refute_pct": 120.0},
        {"stall_drop": 2.0},
    ],
)
def test_out_of_range_settings_are_usage_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        SimConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "latency",
    [0.25, FixedLatency(seconds=0.1), LogNormalLatency(median=0.2, sigma=0.5), UniformLatency(low=0.1, high=0.3)],
)
def test_json_round_trip(latency: object) -> None:
    cfg = SimConfig(latency=latency, rpm=60, rate_429=0.1, seed=7, models=("a", "b"))  # type: ignore[arg-type]
    assert SimConfig.from_json(cfg.to_json()) == cfg


def test_unknown_settings_are_rejected() -> None:
    with pytest.raises(UsageError):
        SimConfig.from_json({"colour": "blue"})


def test_latency_samples_are_seeded() -> None:
    cfg = SimConfig(latency=LogNormalLatency(median=0.1, sigma=0.8))
    a = [cfg.sample_latency(random.Random(3)) for _ in range(3)]
    b = [cfg.sample_latency(random.Random(3)) for _ in range(3)]
    assert a == b
    samples = sorted(cfg.sample_latency(random.Random(i)) for i in range(2001))
    assert 0.08 < samples[1000] < 0.12  # the median is the median


def test_build_config_from_flags() -> None:
    assert build_config(latency_median=0.2).latency == 0.2
    assert build_config(latency_median=0.2, latency_sigma=0.4).latency == LogNormalLatency(median=0.2, sigma=0.4)
    cfg = build_config(rpm=5, tpm=None, seed=None)
    assert cfg.rpm == 5 and cfg.tpm is None and cfg.seed == 0
