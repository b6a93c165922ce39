"""Calls/s by quarter of a run's calls (benchmarks/_quarters.py), on exact values."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
from _quarters import call_times, calls_per_s_by_quarter
from agent_fleet.domain.events import EventType
from agent_fleet.session.memory import MemorySessionLog


def test_each_quarter_runs_from_the_end_of_the_previous_one() -> None:
    # 8 calls: 2 a quarter; the quarters end at 2, 4, 8 and 16 s after the start at 100 s
    ends = [101.0, 102.0, 103.0, 104.0, 106.0, 108.0, 112.0, 116.0]
    assert calls_per_s_by_quarter(100.0, ends) == [1.0, 1.0, 0.5, 0.25]


def test_calls_are_taken_in_the_order_they_ended() -> None:
    ends = [104.0, 101.0, 102.0, 103.0]
    assert calls_per_s_by_quarter(100.0, ends) == [1.0, 1.0, 1.0, 1.0]


def test_uneven_counts_split_by_count() -> None:
    # 5 calls: quarters of 1, 1, 1 and 2 calls (5 * q // 4)
    ends = [1.0, 2.0, 4.0, 5.0, 6.0]
    assert calls_per_s_by_quarter(0.0, ends) == [1.0, 1.0, 0.5, 1.0]


def test_the_quarters_together_are_the_whole_run() -> None:
    ends = [0.5 * n + 0.25 for n in range(1, 41)]
    rates = calls_per_s_by_quarter(0.0, ends)
    spans = [10 / r for r in rates]
    assert math.isclose(sum(spans), ends[-1])


def test_empty_quarters_and_quarters_in_no_time() -> None:
    assert calls_per_s_by_quarter(0.0, []) == [0.0, 0.0, 0.0, 0.0]
    assert calls_per_s_by_quarter(0.0, [1.0, 1.0]) == [0.0, 1.0, 0.0, math.inf]


def test_other_shares_and_bad_input() -> None:
    assert calls_per_s_by_quarter(0.0, [1.0, 3.0], parts=2) == [1.0, 0.5]
    with pytest.raises(ValueError):
        calls_per_s_by_quarter(0.0, [1.0], parts=0)
    with pytest.raises(ValueError):
        calls_per_s_by_quarter(5.0, [1.0])


async def test_call_times_are_read_from_the_runs_log() -> None:
    ticks = iter(float(t) for t in range(100, 200))
    log = MemorySessionLog(wall_clock=lambda: next(ticks))
    await log.open()
    run = "r1"
    await log.emit_event(run, EventType.RUN_CREATED, {"task": "t"})
    times: dict[str, list[float]] = {EventType.MODEL_REQUEST: [], EventType.MODEL_RESPONSE: []}
    for n in range(2):
        sid = f"{run}.s{n:05d}"
        await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": run, "partition_id": f"p{n}", "index": n})
        for kind in (EventType.MODEL_REQUEST, EventType.MODEL_RESPONSE, EventType.TOOL_CALL):
            ev = await log.emit_event(sid, kind, {"turn": 1})
            times.setdefault(kind, []).append(ev.time)
    start, ends = await call_times(log, run)
    assert start == 102.0  # the first session's request (the run's creation and the sessions' are not calls)
    assert sorted(ends) == [103.0, 107.0] == times[EventType.MODEL_RESPONSE]
    await log.close()
