from __future__ import annotations

import pytest

from agent_fleet.clock import VirtualClock
from agent_fleet.dispatch.health import BreakerState, HealthConfig, HealthMonitor, Liveness


def make(**kw: float) -> tuple[VirtualClock, HealthMonitor]:
    clock = VirtualClock()
    mon = HealthMonitor(clock, HealthConfig(**kw))  # type: ignore[arg-type]
    mon.add("w1")
    return clock, mon


@pytest.mark.parametrize(
    ("silence", "expected"),
    [(0.0, Liveness.ALIVE), (2.999, Liveness.ALIVE), (3.0, Liveness.DEAD), (10.0, Liveness.DEAD)],
)
def test_missing_heartbeats_mean_dead_after_three_seconds(silence: float, expected: Liveness) -> None:
    clock, mon = make()
    clock.advance(silence)
    assert mon.liveness("w1") is expected


def test_heartbeat_keeps_worker_alive() -> None:
    clock, mon = make()
    for _ in range(10):
        clock.advance(1.0)
        mon.heartbeat("w1")
    assert mon.liveness("w1") is Liveness.ALIVE
    clock.advance(3.0)
    assert mon.liveness("w1") is Liveness.DEAD


def test_busy_worker_without_progress_is_hung() -> None:
    clock, mon = make(hung_after=5.0)
    mon.set_busy("w1", True)
    for t in range(1, 5):
        clock.set(float(t))
        mon.heartbeat("w1", progress=7)  # same marker after the first beat
    assert mon.liveness("w1") is Liveness.ALIVE  # progress first seen at t=1
    clock.set(6.0)
    mon.heartbeat("w1", progress=7)
    assert mon.liveness("w1") is Liveness.HUNG  # 6 - 1 >= 5
    mon.heartbeat("w1", progress=8)
    assert mon.liveness("w1") is Liveness.ALIVE


def test_idle_worker_is_never_hung() -> None:
    clock, mon = make(hung_after=2.0)
    for t in range(1, 10):
        clock.set(float(t))
        mon.heartbeat("w1", progress=1)
    assert mon.liveness("w1") is Liveness.ALIVE


def test_breaker_opens_on_third_consecutive_failure_and_probes_after_cooldown() -> None:
    clock, mon = make(cooldown=30.0)
    mon.record_failure("w1")
    mon.record_failure("w1")
    assert mon.breaker("w1") is BreakerState.CLOSED
    mon.record_success("w1", 1.0)  # a success resets the streak
    for _ in range(2):
        mon.record_failure("w1")
    assert mon.breaker("w1") is BreakerState.CLOSED
    clock.set(100.0)
    mon.heartbeat("w1")
    mon.record_failure("w1")
    assert mon.breaker("w1") is BreakerState.OPEN
    assert not mon.admits_work("w1")
    clock.set(129.0)
    mon.heartbeat("w1")
    assert mon.breaker("w1") is BreakerState.OPEN
    clock.set(130.0)
    mon.heartbeat("w1")
    assert mon.breaker("w1") is BreakerState.HALF_OPEN
    assert mon.admits_work("w1")
    mon.start_probe("w1")
    assert not mon.admits_work("w1")  # one probe at a time
    mon.record_success("w1", 1.0)
    assert mon.breaker("w1") is BreakerState.CLOSED
    assert mon.stats("w1").consecutive_failures == 0


def test_failed_probe_reopens_with_doubled_cooldown_capped() -> None:
    clock, mon = make(cooldown=10.0, max_cooldown=25.0)
    for _ in range(3):
        mon.record_failure("w1")
    expected_cooldowns = [20.0, 25.0, 25.0]
    opened = 0.0
    for cooldown in expected_cooldowns:
        clock.set(opened + 1000.0)
        mon.heartbeat("w1")
        assert mon.breaker("w1") is BreakerState.HALF_OPEN
        mon.start_probe("w1")
        mon.record_failure("w1")
        opened = clock.now()
        assert mon.breaker("w1") is BreakerState.OPEN
        clock.set(opened + cooldown - 0.5)
        mon.heartbeat("w1")
        assert mon.breaker("w1") is BreakerState.OPEN
        clock.set(opened + cooldown)
        mon.heartbeat("w1")
        assert mon.breaker("w1") is BreakerState.HALF_OPEN


def test_risk_is_exact_mix_of_failure_ewma_and_latency_trend() -> None:
    _, mon = make(short_alpha=0.5, long_alpha=0.1, failure_alpha=0.5, min_samples=3)
    for _ in range(3):
        mon.record_success("w1", 1.0)
    assert mon.risk("w1") == 0.0
    mon.record_success("w1", 3.0)
    # short = 0.5*3 + 0.5*1 = 2.0, long = 0.1*3 + 0.9*1 = 1.2 -> trend = 2/1.2 - 1 = 0.6667
    assert mon.risk("w1") == pytest.approx(0.4 * (2.0 / 1.2 - 1.0))
    mon.record_failure("w1")
    # failure ewma = 0.5; latency untouched
    assert mon.risk("w1") == pytest.approx(0.6 * 0.5 + 0.4 * (2.0 / 1.2 - 1.0))


def test_rising_failures_and_latency_drain_worker_before_breaker_trips() -> None:
    _, mon = make(failure_alpha=0.5, drain_at=0.6)
    for _ in range(4):
        mon.record_success("w1", 1.0)
    mon.record_failure("w1", 4.0)
    mon.record_success("w1", 6.0)
    mon.record_failure("w1", 8.0)
    st = mon.stats("w1")
    assert st.breaker is BreakerState.CLOSED and st.consecutive_failures == 1
    assert st.risk >= 0.6
    assert mon.at_risk() == ["w1"]
    assert not mon.admits_work("w1")


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        HealthConfig(trip_after=0)
    with pytest.raises(ValueError):
        HealthConfig(dead_after=0)
