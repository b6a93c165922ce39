"""Worker health: heartbeats, per-worker latency and failure tracking, circuit breaker, risk score.

Pure decision code on an injected :class:`~agent_fleet.clock.Clock`; nothing here sleeps.

Invariants:

* A worker is **dead** when no heartbeat arrived for ``dead_after`` seconds, and **hung** when it is
  busy and its progress marker (e.g. the last session-log seq it wrote) has not moved for
  ``hung_after`` seconds even though heartbeats still arrive.
* The breaker opens on the ``trip_after``-th consecutive failure (default 3). An open breaker keeps
  the worker out of the pool for ``cooldown`` seconds, then lets exactly one probe through
  (half-open). The probe's success closes it; its failure re-opens it with the cooldown doubled
  (capped at ``max_cooldown``).
* The risk score is ``failure_weight * failure_ewma + latency_weight * trend`` where ``trend`` is
  ``clamp((short_ewma / long_ewma - 1) / trend_span, 0, 1)``: how far recent latency has risen above
  the worker's own baseline. A worker whose risk reaches ``drain_at`` takes no new work.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent_fleet.clock import Clock
from agent_fleet.domain.breaker import BreakerState

__all__ = [
    "BreakerState",
    "HealthConfig",
    "HealthMonitor",
    "Liveness",
    "WorkerHealth",
    "WorkerHealthStats",
]


class Liveness(StrEnum):
    ALIVE = "alive"
    HUNG = "hung"
    DEAD = "dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthConfig:
    heartbeat_interval: float = 1.0
    dead_after: float = 3.0  # three missed heartbeats
    hung_after: float = 10.0  # busy without progress
    trip_after: int = 3  # consecutive failures that open the breaker
    cooldown: float = 30.0
    max_cooldown: float = 300.0
    short_alpha: float = 0.5  # EWMA weight of the newest latency sample (recent trend)
    long_alpha: float = 0.1  # EWMA weight for the baseline
    failure_alpha: float = 0.3  # EWMA weight of the newest outcome (1 = failure)
    failure_weight: float = 0.6
    latency_weight: float = 0.4
    trend_span: float = 1.0  # latency at 2x its baseline gives a full trend term
    drain_at: float = 0.6
    min_samples: int = 3  # no risk from latency trend before this many samples

    def __post_init__(self) -> None:
        if self.trip_after < 1:
            raise ValueError("trip_after must be at least 1")
        if self.dead_after <= 0 or self.hung_after <= 0 or self.cooldown <= 0:
            raise ValueError("health timeouts must be positive")


@dataclass(frozen=True, slots=True)
class WorkerHealthStats:
    worker_id: str
    liveness: Liveness
    breaker: BreakerState
    consecutive_failures: int
    successes: int
    failures: int
    latency_short: float | None
    latency_long: float | None
    failure_ewma: float
    risk: float


@dataclass(slots=True)
class WorkerHealth:
    """Mutable health record of one worker; owned by :class:`HealthMonitor`."""

    worker_id: str
    last_heartbeat: float
    last_progress_at: float
    progress: object = None
    busy: bool = False
    breaker: BreakerState = BreakerState.CLOSED
    opened_at: float = 0.0
    cooldown: float = 0.0
    probe_in_flight: bool = False
    consecutive_failures: int = 0
    successes: int = 0
    failures: int = 0
    samples: int = 0
    latency_short: float | None = None
    latency_long: float | None = None
    failure_ewma: float = 0.0


def _ewma(prev: float | None, sample: float, alpha: float) -> float:
    return sample if prev is None else alpha * sample + (1.0 - alpha) * prev


class HealthMonitor:
    """Tracks every registered worker's liveness, breaker and risk."""

    def __init__(self, clock: Clock, config: HealthConfig | None = None) -> None:
        self._clock = clock
        self.config = config or HealthConfig()
        self._workers: dict[str, WorkerHealth] = {}

    # -- membership ---------------------------------------------------------------------------
    def add(self, worker_id: str) -> None:
        now = self._clock.now()
        self._workers[worker_id] = WorkerHealth(worker_id, last_heartbeat=now, last_progress_at=now)

    def remove(self, worker_id: str) -> None:
        self._workers.pop(worker_id, None)

    def __contains__(self, worker_id: object) -> bool:
        return worker_id in self._workers

    # -- signals ------------------------------------------------------------------------------
    def heartbeat(self, worker_id: str, *, progress: object = None, busy: bool | None = None) -> None:
        """A worker is alive; ``progress`` changing means it is also making headway."""
        w = self._workers[worker_id]
        now = self._clock.now()
        w.last_heartbeat = now
        if progress is not None and progress != w.progress:
            w.progress = progress
            w.last_progress_at = now
        if busy is not None:
            if busy and not w.busy:
                w.last_progress_at = now  # a fresh assignment starts its own hung timer
            w.busy = busy

    def set_busy(self, worker_id: str, busy: bool) -> None:
        w = self._workers[worker_id]
        if busy and not w.busy:
            w.last_progress_at = self._clock.now()
        w.busy = busy

    def record_success(self, worker_id: str, latency: float) -> None:
        w = self._workers.get(worker_id)
        if w is None:
            return
        c = self.config
        w.successes += 1
        w.consecutive_failures = 0
        w.samples += 1
        w.latency_short = _ewma(w.latency_short, latency, c.short_alpha)
        w.latency_long = _ewma(w.latency_long, latency, c.long_alpha)
        w.failure_ewma = _ewma(w.failure_ewma, 0.0, c.failure_alpha)
        if w.breaker is BreakerState.HALF_OPEN:
            w.breaker = BreakerState.CLOSED
            w.cooldown = 0.0
        w.probe_in_flight = False

    def record_failure(self, worker_id: str, latency: float | None = None) -> None:
        w = self._workers.get(worker_id)
        if w is None:
            return
        c = self.config
        now = self._clock.now()
        w.failures += 1
        w.consecutive_failures += 1
        w.failure_ewma = _ewma(w.failure_ewma, 1.0, c.failure_alpha)
        if latency is not None:
            w.samples += 1
            w.latency_short = _ewma(w.latency_short, latency, c.short_alpha)
            w.latency_long = _ewma(w.latency_long, latency, c.long_alpha)
        if w.breaker is BreakerState.HALF_OPEN:
            w.breaker = BreakerState.OPEN
            w.opened_at = now
            w.cooldown = min(c.max_cooldown, max(c.cooldown, w.cooldown * 2.0))
        elif w.breaker is BreakerState.CLOSED and w.consecutive_failures >= c.trip_after:
            w.breaker = BreakerState.OPEN
            w.opened_at = now
            w.cooldown = c.cooldown
        w.probe_in_flight = False

    # -- reads --------------------------------------------------------------------------------
    def liveness(self, worker_id: str) -> Liveness:
        w = self._workers[worker_id]
        now = self._clock.now()
        if now - w.last_heartbeat >= self.config.dead_after:
            return Liveness.DEAD
        if w.busy and now - w.last_progress_at >= self.config.hung_after:
            return Liveness.HUNG
        return Liveness.ALIVE

    def breaker(self, worker_id: str) -> BreakerState:
        """The breaker state, moving OPEN to HALF_OPEN once the cooldown has passed."""
        w = self._workers[worker_id]
        if w.breaker is BreakerState.OPEN and self._clock.now() - w.opened_at >= w.cooldown:
            w.breaker = BreakerState.HALF_OPEN
            w.probe_in_flight = False
        return w.breaker

    def risk(self, worker_id: str) -> float:
        w = self._workers[worker_id]
        c = self.config
        trend = 0.0
        if w.samples >= c.min_samples and w.latency_short is not None and w.latency_long:
            trend = min(1.0, max(0.0, (w.latency_short / w.latency_long - 1.0) / c.trend_span))
        return c.failure_weight * w.failure_ewma + c.latency_weight * trend

    def admits_work(self, worker_id: str) -> bool:
        """May this worker take a new assignment now? (alive, breaker allows, not at risk)

        A half-open breaker admits one probe: the caller must call :meth:`start_probe` when it
        actually assigns, so the next call answers False until the probe reports.
        """
        if worker_id not in self._workers or self.liveness(worker_id) is not Liveness.ALIVE:
            return False
        state = self.breaker(worker_id)
        if state is BreakerState.OPEN:
            return False
        if state is BreakerState.HALF_OPEN:
            return not self._workers[worker_id].probe_in_flight
        return self.risk(worker_id) < self.config.drain_at

    def start_probe(self, worker_id: str) -> None:
        w = self._workers[worker_id]
        if self.breaker(worker_id) is BreakerState.HALF_OPEN:
            w.probe_in_flight = True

    def abort_probe(self, worker_id: str) -> None:
        """The probe's session went away without a verdict: the next assignment probes again."""
        w = self._workers.get(worker_id)
        if w is not None:
            w.probe_in_flight = False

    def at_risk(self) -> list[str]:
        """Alive workers whose risk says: move queued work off them before they fail."""
        return sorted(
            wid
            for wid in self._workers
            if self.liveness(wid) is Liveness.ALIVE and self.risk(wid) >= self.config.drain_at
        )

    def unhealthy(self) -> dict[str, Liveness]:
        """Workers that are dead or hung right now."""
        out: dict[str, Liveness] = {}
        for wid in sorted(self._workers):
            state = self.liveness(wid)
            if state is not Liveness.ALIVE:
                out[wid] = state
        return out

    def stats(self, worker_id: str) -> WorkerHealthStats:
        w = self._workers[worker_id]
        return WorkerHealthStats(
            worker_id=worker_id,
            liveness=self.liveness(worker_id),
            breaker=self.breaker(worker_id),
            consecutive_failures=w.consecutive_failures,
            successes=w.successes,
            failures=w.failures,
            latency_short=w.latency_short,
            latency_long=w.latency_long,
            failure_ewma=w.failure_ewma,
            risk=self.risk(worker_id),
        )

    def __repr__(self) -> str:
        states = [self.breaker(w) for w in self._workers]
        return (
            f"HealthMonitor(workers={len(self._workers)}, open={states.count(BreakerState.OPEN)}, "
            f"half_open={states.count(BreakerState.HALF_OPEN)})"
        )
