from __future__ import annotations

import pytest

from agent_fleet.errors import ConfigError
from agent_fleet.hands.resources import Resources, ResourceSpec, parse_cpu, parse_memory


@pytest.mark.parametrize(("text", "cores"), [("2", 2.0), ("500m", 0.5), (0.25, 0.25), ("1.5", 1.5)])
def test_parse_cpu(text: str | float, cores: float) -> None:
    assert parse_cpu(text) == cores


@pytest.mark.parametrize(
    ("text", "size"),
    [("512Mi", 512 * 2**20), ("1Gi", 2**30), ("1G", 10**9), ("1.5Gi", 3 * 2**29), (4096, 4096), ("10k", 10_000)],
)
def test_parse_memory(text: str | int, size: int) -> None:
    assert parse_memory(text) == size


@pytest.mark.parametrize("bad", ["x", "-1", "0", "1Qi", ""])
def test_bad_quantities_are_config_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_memory(bad)
    with pytest.raises(ConfigError):
        parse_cpu(bad if bad != "1Qi" else "abc")


def test_limits_default_to_requests_times_headroom() -> None:
    spec = ResourceSpec.of({"cpu": "500m", "memory": "256Mi"})
    assert spec.requests == Resources(cpu=0.5, memory=256 * 2**20)
    assert spec.effective_limits == Resources(cpu=1.0, memory=512 * 2**20)
    assert ResourceSpec.of({"cpu": 1}, headroom=1.5).effective_limits.cpu == 1.5


def test_limits_equal_to_requests_are_refused() -> None:
    with pytest.raises(ConfigError, match="above requests"):
        ResourceSpec.of({"cpu": 1, "memory": "1Gi"}, {"cpu": 1, "memory": "2Gi"})
    with pytest.raises(ConfigError, match="headroom"):
        ResourceSpec(headroom=1.0)
    with pytest.raises(ConfigError, match="unknown resource"):
        ResourceSpec.of({"gpu": 1})


def test_explicit_limits_keep_unspecified_ones_from_headroom() -> None:
    spec = ResourceSpec.of({"cpu": 1, "memory": "1Gi"}, {"memory": "3Gi"})
    assert spec.effective_limits == Resources(cpu=2.0, memory=3 * 2**30)


@pytest.mark.parametrize(("cpu", "wall", "seconds"), [(1.0, 10.0, 20), (0.25, 10.0, 5), (0.5, 0.1, 1)])
def test_cpu_seconds_is_limit_cores_times_wall(cpu: float, wall: float, seconds: int) -> None:
    assert ResourceSpec.of({"cpu": cpu}).cpu_seconds(wall) == seconds
