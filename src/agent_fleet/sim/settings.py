"""Configuration of the simulated model provider.

The random parts of the simulation (latency, injected errors, stalls) draw from one RNG seeded by
``SimConfig.seed``; the *content* of every answer is a pure function of the request and never
depends on this configuration's randomness.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from agent_fleet.errors import UsageError

__all__ = [
    "FixedLatency",
    "LatencyModel",
    "LogNormalLatency",
    "SimConfig",
    "SimConfigError",
    "UniformLatency",
]


class SimConfigError(UsageError):
    """A simulated-provider setting is out of range."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FixedLatency:
    seconds: float = 0.0

    def sample(self, rng: random.Random) -> float:
        return self.seconds


@dataclass(frozen=True, kw_only=True, slots=True)
class LogNormalLatency:
    """Latency whose logarithm is normal: half the calls are faster than ``median``."""

    median: float
    sigma: float

    def sample(self, rng: random.Random) -> float:
        if self.median <= 0:
            return 0.0
        return rng.lognormvariate(math.log(self.median), self.sigma)


@dataclass(frozen=True, kw_only=True, slots=True)
class UniformLatency:
    low: float
    high: float

    def sample(self, rng: random.Random) -> float:
        return rng.uniform(self.low, self.high)


LatencyModel = FixedLatency | LogNormalLatency | UniformLatency

_RATE_FIELDS = ("rate_429", "rate_500", "rate_503", "rate_529", "rate_stall")


@dataclass(frozen=True, kw_only=True, slots=True)
class SimConfig:
    """How the simulated provider behaves.

    ``latency`` is a number of seconds or one of the latency models, counted from the request's
    arrival (the server's own parsing and rendering happen inside it); ``per_output_token_s`` adds time
    per completion token (spread over the chunks when streaming). The ``rate_*`` fields are
    independent probabilities per request whose sum must not exceed 1. ``max_concurrency``,
    ``rpm`` and ``tpm`` are a hidden capacity: above them the server answers 429, like a real
    provider would. ``None`` means unlimited (the rate-limit headers then show nominal limits).
    ``edits`` makes the simulated agent fix what it can (a mechanical fix per finding) besides reporting it.
    ``context_windows`` maps a model (or ``"*"``, every other one) to its context window: a request whose
    prompt plus output limit exceeds it is refused with the API's context-length 400 (sim_window).
    """

    latency: float | LatencyModel = 0.0
    per_output_token_s: float = 0.0
    seed: int = 0
    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_503: float = 0.0
    rate_529: float = 0.0
    rate_stall: float = 0.0
    stall_seconds: float = 30.0
    # Share of stalls that end with the connection dropped instead of a late answer.
    stall_drop: float = 0.5
    insufficient_quota: bool = False
    # Answer 404 (as the real APIs do) for a model not in ``models``; by default any name is served.
    reject_unknown_models: bool = False
    max_concurrency: int | None = None
    rpm: int | None = None
    tpm: int | None = None
    # The simulated agent also edits: a mechanical fix per finding where there is one (sim_fixes),
    # with the built-in agent's edit_file or a coding CLI's own edit tool. Off by default, so a
    # review's calls and tokens stay what they were.
    edits: bool = False
    verifier_refute_pct: float = 10.0
    verifier_unsure_pct: float = 5.0
    # Prompt caching: a served prefix of at least this many tokens is reported as cached next time.
    cache_min_tokens: int = 1024
    cache_entries: int = 20_000
    context_windows: dict[str, int] = field(default_factory=dict)
    # Count the tokens billed per conversation (its first user message) in /sim/stats: a session's own bill.
    bill_by_conversation: bool = False
    models: tuple[str, ...] = field(
        default=("sim-small", "sim-large", "gpt-4.1-mini", "gpt-4.1", "claude-sonnet-4-5", "claude-opus-4-5")
    )

    def __post_init__(self) -> None:
        for name in _RATE_FIELDS:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise SimConfigError(f"{name} must be between 0 and 1, got {value}")
        total = sum(getattr(self, name) for name in _RATE_FIELDS)
        if total > 1.0 + 1e-9:
            raise SimConfigError(f"injected error rates add up to {total:.3f}, more than 1")
        if not 0.0 <= self.stall_drop <= 1.0:
            raise SimConfigError(f"stall_drop must be between 0 and 1, got {self.stall_drop}")
        for name in ("max_concurrency", "rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SimConfigError(f"{name} must be at least 1, got {value}")
        for name in ("per_output_token_s", "stall_seconds"):
            if getattr(self, name) < 0:
                raise SimConfigError(f"{name} must not be negative")
        if isinstance(self.latency, int | float) and self.latency < 0:
            raise SimConfigError("latency must not be negative")
        if isinstance(self.latency, LogNormalLatency) and (self.latency.median < 0 or self.latency.sigma < 0):
            raise SimConfigError("latency median and sigma must not be negative")
        if isinstance(self.latency, UniformLatency) and not 0 <= self.latency.low <= self.latency.high:
            raise SimConfigError("uniform latency needs 0 <= low <= high")
        for name in ("verifier_refute_pct", "verifier_unsure_pct"):
            if not 0.0 <= getattr(self, name) <= 100.0:
                raise SimConfigError(f"{name} must be a percentage")
        for model, window in self.context_windows.items():
            if not isinstance(window, int) or window < 1:
                raise SimConfigError(f"context window of {model!r} must be a positive number of tokens")
        if self.cache_entries < 1:
            raise SimConfigError("cache_entries must be at least 1")

    def sample_latency(self, rng: random.Random) -> float:
        if isinstance(self.latency, int | float):
            return float(self.latency)
        return max(0.0, self.latency.sample(rng))

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe form, read back by :meth:`from_json` (used to hand a config to a child process)."""
        data = asdict(self)
        latency = self.latency
        if isinstance(latency, FixedLatency):
            data["latency"] = {"kind": "fixed", "seconds": latency.seconds}
        elif isinstance(latency, LogNormalLatency):
            data["latency"] = {"kind": "lognormal", "median": latency.median, "sigma": latency.sigma}
        elif isinstance(latency, UniformLatency):
            data["latency"] = {"kind": "uniform", "low": latency.low, "high": latency.high}
        data["models"] = list(self.models)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SimConfig:
        data = dict(data)
        latency = data.get("latency", 0.0)
        if isinstance(latency, dict):
            kind = latency.get("kind")
            if kind == "fixed":
                data["latency"] = FixedLatency(seconds=float(latency["seconds"]))
            elif kind == "lognormal":
                data["latency"] = LogNormalLatency(median=float(latency["median"]), sigma=float(latency["sigma"]))
            elif kind == "uniform":
                data["latency"] = UniformLatency(low=float(latency["low"]), high=float(latency["high"]))
            else:
                raise SimConfigError(f"unknown latency kind {kind!r}")
        if "models" in data:
            data["models"] = tuple(data["models"])
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise SimConfigError(f"unknown simulated-provider settings: {', '.join(unknown)}")
        return cls(**data)
