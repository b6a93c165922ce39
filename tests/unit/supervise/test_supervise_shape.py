"""Decision-shape alarms over hand-built session logs: exact robust z-scores, fan-out, repeats."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_fleet.config import ShapePolicy
from agent_fleet.domain.events import Event, EventType
from agent_fleet.supervise import shape_alarms
from agent_fleet.supervise.shape import robust_scores, session_shapes

RUN = "run-test"


class Log:
    """Events of one run's agent sessions, seq numbered per session."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._seq: dict[str, int] = {}

    def add(self, sid: str, type: str, **data: Any) -> None:
        self._seq[sid] = self._seq.get(sid, 0) + 1
        self.events.append(Event(sid, self._seq[sid], type, float(len(self.events)), data))

    def session(self, n: int, *, turns: int, calls: list[tuple[str, dict[str, Any]]], tokens: int = 100) -> str:
        sid = f"{RUN}.s{n:05d}"
        self.add(sid, EventType.SESSION_CREATED, partition={"est_tokens": 50})
        for t in range(turns):
            usage = {"input_tokens": tokens - 10, "output_tokens": 10}
            self.add(sid, EventType.MODEL_RESPONSE, turn=t + 1, response={"usage": usage})
        for i, (name, args) in enumerate(calls):
            self.add(sid, EventType.TOOL_CALL, call_id=f"c{i}", name=name, arguments=json.dumps(args))
        return sid


def _normal(log: Log, n: int) -> str:
    return log.session(n, turns=3, calls=[("read_file", {"path": f"f{n}.py"}), ("finish", {"summary": "done"})])


def test_robust_scores_use_mad_and_fall_back_to_the_mean_deviation() -> None:
    med, scale, zs = robust_scores([1, 2, 3, 4, 100]) or (0, 0, [])
    assert med == 3 and scale == pytest.approx(1.4826)  # MAD = 1
    assert zs[-1] == pytest.approx(97 / 1.4826)
    med, scale, zs = robust_scores([3, 3, 3, 3, 23]) or (0, 0, [])  # MAD 0: mean absolute deviation 4
    assert med == 3 and scale == pytest.approx(1.253314 * 4)
    assert robust_scores([5, 5, 5]) is None


def test_a_looping_session_is_an_outlier_and_the_others_are_not() -> None:
    log = Log()
    for n in range(6):
        _normal(log, n)
    loop = log.session(6, turns=21, calls=[("read_file", {"path": "f6.py"})] * 20 + [("finish", {})])
    alarms = shape_alarms(RUN, log.events, ShapePolicy())
    assert [(a.kind, a.subject) for a in alarms] == [("shape.outlier", loop)]
    metrics = alarms[0].figures["metrics"]
    assert set(metrics) == {"turns", "tool_calls", "tokens"}
    # 7 sessions, tool calls [2]*6 + [21]: median 2, MAD 0, mean deviation 19/7
    assert metrics["tool_calls"]["z"] == round(19 / (1.253314 * 19 / 7), 2)
    assert alarms[0].figures["top_repeat"]["times"] == 20
    assert "the same call 20 times" in alarms[0].message


def test_no_outlier_below_the_ratio_or_with_too_few_sessions() -> None:
    log = Log()
    for n in range(6):
        log.session(n, turns=10, calls=[])
    log.session(6, turns=15, calls=[])  # z is large (MAD 0) but 15 < 2 x 10
    assert shape_alarms(RUN, log.events, ShapePolicy()) == []
    few = Log()
    for n in range(3):
        _normal(few, n)
    few.session(3, turns=40, calls=[])
    assert shape_alarms(RUN, few.events, ShapePolicy()) == []  # 4 sessions < min_sessions 5
    # one outlier among n alike sessions scores n / 1.2533 (3.19 here): under 3.5, over 3.0
    assert shape_alarms(RUN, few.events, ShapePolicy(min_sessions=3)) == []
    assert shape_alarms(RUN, few.events, ShapePolicy(min_sessions=3, z_threshold=3.0))[0].kind == "shape.outlier"


def test_a_trivial_task_fanned_out_and_a_call_repeated_across_sessions() -> None:
    log = Log()
    for n in range(4):
        log.session(n, turns=2, calls=[("fetch_url", {"url": "https://example.com/a"}), ("list_files", {})])
    policy = ShapePolicy(fanout_sessions=4, trivial_tokens=200, repeated_calls=3)
    kinds = {a.kind: a for a in shape_alarms(RUN, log.events, policy)}
    assert set(kinds) == {"shape.fanout", "shape.repeated_call"}  # list_files() has no arguments: not counted
    assert kinds["shape.fanout"].figures == {"sessions": 4, "est_tokens": 200}
    repeated = kinds["shape.repeated_call"]
    assert repeated.figures["sessions"] == 4 and repeated.subject.startswith(f"{RUN}#")
    assert repeated.figures["call"] == 'fetch_url({"url":"https://example.com/a"})'
    assert shape_alarms(RUN, log.events, ShapePolicy(fanout_sessions=5, trivial_tokens=200, repeated_calls=5)) == []


def test_shapes_fold_one_event_at_a_time() -> None:
    log = Log()
    sid = log.session(0, turns=2, calls=[("grep", {"pattern": "x"})] * 3, tokens=50)
    shape = session_shapes(log.events)[sid]
    assert (shape.turns, shape.tool_calls, shape.tokens, shape.est_tokens) == (2, 3, 100, 50)
    assert shape.top_repeat == ('grep({"pattern":"x"})', 3)


def test_the_live_watch_names_a_running_outlier_once_and_never_a_stopped_one() -> None:
    from agent_fleet.supervise import ShapeWatch

    log = Log()
    for n in range(6):
        _normal(log, n)
    loop = log.session(6, turns=12, calls=[("read_file", {"path": "f6.py"})] * 12)
    done = log.session(7, turns=30, calls=[])
    log.add(done, EventType.SESSION_COMPLETED)
    watch = ShapeWatch(RUN, ShapePolicy())
    watch.heard([Event("run-other.s00000", 1, EventType.MODEL_RESPONSE, 0.0, {})])  # another run: ignored
    watch.heard(log.events)
    assert [a.session_id for a in watch.due()] == [loop]
    assert watch.due() == []  # nothing new heard
    watch.heard([Event(loop, 99, EventType.MODEL_RESPONSE, 0.0, {})])
    assert watch.due() == []  # named once
    again = ShapeWatch(RUN, ShapePolicy())
    again.heard(log.events)
    again.recorded([f"shape.outlier:{loop}"])
    assert again.due() == []
