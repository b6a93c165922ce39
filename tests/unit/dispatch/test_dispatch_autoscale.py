from __future__ import annotations

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.dispatch.autoscale import AutoscaleConfig, Autoscaler


@pytest.mark.parametrize(
    ("current", "busy", "queued", "p95", "expected"),
    [
        (2, 0, 0, None, 2),  # min 1, warm 2
        (2, 5, 0, None, 7),  # ceil(5/1) + 2
        (2, 5, 30, None, 20),  # capped at max
        (4, 2, 0, 9.0, 8),  # latency over the SLO: current + step_up
        (4, 2, 0, 1.0, 4),  # latency fine: demand is 4, no change
    ],
)
def test_demand_table(current: int, busy: int, queued: int, p95: float | None, expected: int) -> None:
    cfg = AutoscaleConfig(min_workers=1, max_workers=20, warm=2, target_load=1, latency_slo=5.0, step_up=4)
    assert (
        Autoscaler(VirtualClock(), cfg).desired(current=current, busy=busy, queued=queued, latency_p95=p95) == expected
    )


def test_target_load_divides_demand() -> None:
    a = Autoscaler(VirtualClock(), AutoscaleConfig(warm=0, target_load=4))
    assert a.demand(current=1, busy=9, queued=0) == 3


def test_shrink_waits_for_cooldown_then_steps_down() -> None:
    clock = VirtualClock()
    a = Autoscaler(clock, AutoscaleConfig(min_workers=2, max_workers=50, warm=0, step_down=3, down_cooldown=60.0))
    assert a.desired(current=10, busy=0, queued=0) == 10  # lull starts at t=0
    clock.set(59.0)
    assert a.desired(current=10, busy=0, queued=0) == 10
    clock.set(60.0)
    assert a.desired(current=10, busy=0, queued=0) == 7
    clock.set(100.0)
    assert a.desired(current=7, busy=0, queued=0) == 7  # next step waits a new cooldown
    clock.set(120.0)
    assert a.desired(current=7, busy=0, queued=0) == 4
    clock.set(121.0)
    assert a.desired(current=4, busy=6, queued=0) == 6  # growth is immediate and resets the lull
    clock.set(150.0)
    assert a.desired(current=6, busy=0, queued=0) == 6
    clock.set(210.0)
    assert a.desired(current=6, busy=0, queued=0) == 3
    clock.set(270.0)
    assert a.desired(current=3, busy=0, queued=0) == 2  # never below min


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        AutoscaleConfig(min_workers=5, max_workers=2)
    with pytest.raises(ValueError):
        AutoscaleConfig(target_load=0)
