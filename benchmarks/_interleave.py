"""Two sides of a ratio timed in turns, so a busy moment of a shared machine weighs on both alike.

Each round runs both sides once, one right after the other, and gives one ratio (``ours`` over
``baseline``); the order alternates from round to round (the baseline first in even rounds), so
neither side always runs on a cache the other warmed or in the slot a periodic load falls in. The
figure is the median of the rounds' ratios, with their lowest and highest as its spread: a load
that comes and goes moves single rounds, not the median.

Wall-clock seconds and CPU seconds (this process and the child processes it waited for) are kept
for each side: on a machine other work shares, CPU time is the steadier of the two.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Round", "Spread", "Timed", "cpu_seconds", "first_of_round", "interleave", "load_average", "spread"]


def cpu_seconds() -> float:
    """User + system CPU seconds so far of this process and of its waited-for child processes."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass(frozen=True, slots=True)
class Timed:
    wall: float
    cpu: float


@dataclass(frozen=True, slots=True)
class Round:
    baseline: Timed
    ours: Timed
    ours_first: bool

    @property
    def wall_ratio(self) -> float:
        return self.ours.wall / self.baseline.wall

    @property
    def cpu_ratio(self) -> float:
        return self.ours.cpu / self.baseline.cpu


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.2f}x (rounds {self.low:.2f}-{self.high:.2f})"


def spread(values: Sequence[float]) -> Spread:
    """The median of ``values`` with their lowest and highest."""
    if not values:
        raise ValueError("no values")
    return Spread(statistics.median(values), min(values), max(values))


def first_of_round(k: int) -> str:
    """Which side runs first in round ``k``: the baseline in even rounds, ours in odd ones."""
    return "baseline" if k % 2 == 0 else "ours"


def _timed(run: Callable[[int], None], k: int, clock: Callable[[], float], cpu: Callable[[], float]) -> Timed:
    w0, c0 = clock(), cpu()
    run(k)
    return Timed(clock() - w0, cpu() - c0)


def interleave(
    rounds: int,
    baseline: Callable[[int], None],
    ours: Callable[[int], None],
    *,
    clock: Callable[[], float] = time.perf_counter,
    cpu: Callable[[], float] = cpu_seconds,
) -> list[Round]:
    """``rounds`` rounds of both sides (each called with the round's number), in alternating order."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    out = []
    for k in range(rounds):
        if first_of_round(k) == "baseline":
            b = _timed(baseline, k, clock, cpu)
            o = _timed(ours, k, clock, cpu)
        else:
            o = _timed(ours, k, clock, cpu)
            b = _timed(baseline, k, clock, cpu)
        out.append(Round(b, o, ours_first=first_of_round(k) == "ours"))
    return out


def load_average() -> str:
    """The machine's 1-minute load average and its CPU count, for the printed figures."""
    try:
        one = os.getloadavg()[0]
    except OSError:
        return "load unknown"
    return f"load {one:.1f} on {os.cpu_count()} CPUs"
