"""Two sides of a ratio timed in turns (benchmarks/_interleave.py), on a scripted clock."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
from _interleave import first_of_round, interleave, spread


class Script:
    """A wall clock and a CPU clock that move only when a side runs, by what the script says."""

    def __init__(self, took: dict[str, list[tuple[float, float]]]) -> None:
        self.took = {side: list(v) for side, v in took.items()}
        self.wall = self.cpu = 0.0
        self.order: list[tuple[int, str]] = []

    def side(self, name: str) -> Callable[[int], None]:
        def run(k: int) -> None:
            self.order.append((k, name))
            wall, cpu = self.took[name].pop(0)
            self.wall += wall
            self.cpu += cpu

        return run


def test_the_order_alternates_and_each_round_gives_its_own_ratio() -> None:
    s = Script(
        {
            "baseline": [(1.0, 0.5), (2.0, 1.0), (1.0, 0.5)],
            "ours": [(1.5, 0.6), (2.0, 1.5), (3.0, 0.5)],
        }
    )
    rounds = interleave(3, s.side("baseline"), s.side("ours"), clock=lambda: s.wall, cpu=lambda: s.cpu)
    assert s.order == [(0, "baseline"), (0, "ours"), (1, "ours"), (1, "baseline"), (2, "baseline"), (2, "ours")]
    assert [r.ours_first for r in rounds] == [False, True, False]
    assert [r.wall_ratio for r in rounds] == [1.5, 1.0, 3.0]
    assert [r.cpu_ratio for r in rounds] == pytest.approx([1.2, 1.5, 1.0])
    assert [first_of_round(k) for k in range(4)] == ["baseline", "ours", "baseline", "ours"]


def test_a_busy_round_moves_the_spread_not_the_median() -> None:
    s = spread([1.2, 1.3, 4.0, 1.25, 1.1])
    assert (s.median, s.low, s.high) == (1.25, 1.1, 4.0)
    assert str(s) == "1.25x (rounds 1.10-4.00)"


def test_no_rounds_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        interleave(0, lambda k: None, lambda k: None)
    with pytest.raises(ValueError, match="no values"):
        spread([])
