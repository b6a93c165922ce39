"""What a session asks for (requests) versus what its sandbox may use (limits).

Requests are what admission counts against quotas; limits are the hard caps the sandbox runs
under. They are separate numbers on purpose: a sandbox whose limits equal its requests is killed by
the first transient spike. Limits default to ``requests × headroom`` and must always stay strictly
above the requests.

Quantities accept Kubernetes spellings: cpu ``"2"``, ``"500m"``, ``0.5``; memory ``"512Mi"``,
``"1G"``, ``"1.5Gi"`` or a plain byte count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent_fleet.errors import ConfigError

__all__ = ["ResourceSpec", "Resources", "parse_cpu", "parse_memory"]

_MEM_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_MEM_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kMGT]i?)?\s*$")


def parse_cpu(value: str | float | int) -> float:
    if isinstance(value, int | float):
        cpu = float(value)
    else:
        text = value.strip()
        try:
            cpu = float(text[:-1]) / 1000.0 if text.endswith("m") else float(text)
        except ValueError:
            raise ConfigError(f"bad cpu quantity {value!r} (use e.g. 2, 0.5 or 500m)") from None
    if not math.isfinite(cpu) or cpu <= 0:
        raise ConfigError(f"cpu must be positive, got {value!r}")
    return cpu


def parse_memory(value: str | float | int) -> int:
    if isinstance(value, int | float):
        mem = int(value)
    else:
        m = _MEM_RE.match(value)
        if m is None:
            raise ConfigError(f"bad memory quantity {value!r} (use e.g. 512Mi, 1Gi or bytes)")
        mem = int(float(m.group(1)) * _MEM_UNITS[m.group(2) or ""])
    if mem <= 0:
        raise ConfigError(f"memory must be positive, got {value!r}")
    return mem


@dataclass(frozen=True, slots=True, kw_only=True)
class Resources:
    cpu: float = 1.0  # cores
    memory: int = 512 * 2**20  # bytes

    @classmethod
    def of(cls, data: Mapping[str, str | float | int] | Resources | None, *, default: Resources) -> Resources:
        if data is None:
            return default
        if isinstance(data, Resources):
            return data
        unknown = set(data) - {"cpu", "memory"}
        if unknown:
            raise ConfigError(f"unknown resource names {sorted(unknown)} (known: cpu, memory)")
        return cls(
            cpu=parse_cpu(data["cpu"]) if "cpu" in data else default.cpu,
            memory=parse_memory(data["memory"]) if "memory" in data else default.memory,
        )

    def scaled(self, factor: float) -> Resources:
        return Resources(cpu=self.cpu * factor, memory=int(self.memory * factor))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSpec:
    """Requests for admission, limits for the sandbox, plus caps that have no request."""

    requests: Resources = field(default_factory=Resources)
    limits: Resources | None = None  # None: requests × headroom
    headroom: float = 2.0
    max_processes: int = 256  # RLIMIT_NPROC (per user; see the sandbox notes)
    max_file_bytes: int = 256 * 2**20  # RLIMIT_FSIZE: largest file the sandbox may write
    max_output_bytes: int = 256 * 2**10  # stdout and stderr kept per command; the rest is cut

    def __post_init__(self) -> None:
        if not self.headroom > 1.0:
            raise ConfigError("resource headroom must be above 1: limits equal to requests kill on spikes")
        lim = self.effective_limits
        if not (lim.cpu > self.requests.cpu and lim.memory > self.requests.memory):
            raise ConfigError(
                "sandbox limits must stay above requests "
                f"(cpu {lim.cpu} vs {self.requests.cpu}, memory {lim.memory} vs {self.requests.memory})"
            )
        if self.max_processes < 1 or self.max_file_bytes < 1 or self.max_output_bytes < 1:
            raise ConfigError("sandbox caps must be positive")

    @property
    def effective_limits(self) -> Resources:
        return self.limits if self.limits is not None else self.requests.scaled(self.headroom)

    @classmethod
    def of(
        cls,
        requests: Mapping[str, str | float | int] | Resources | None = None,
        limits: Mapping[str, str | float | int] | Resources | None = None,
        *,
        headroom: float = 2.0,
    ) -> ResourceSpec:
        req = Resources.of(requests, default=Resources())
        lim = None if limits is None else Resources.of(limits, default=req.scaled(headroom))
        return cls(requests=req, limits=lim, headroom=headroom)

    def cpu_seconds(self, wall_timeout: float) -> int:
        """RLIMIT_CPU for a command allowed ``wall_timeout`` seconds: limit cores × wall time."""
        return max(1, math.ceil(self.effective_limits.cpu * wall_timeout))
