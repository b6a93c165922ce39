"""Quality signals per model from the log, and the router's demotion of a model under a threshold."""

from __future__ import annotations

from typing import Any

from agent_fleet.config import ModelConfig, QualityPolicy
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model_quality import ModelSignals
from agent_fleet.spend.router import Difficulty, Router, demotions
from agent_fleet.supervise import model_signals


def _ev(sid: str, seq: int, type: str, t: float, **data: Any) -> Event:
    return Event(sid, seq, type, t, data)


def test_signals_per_model_within_the_window() -> None:
    a, b = "run-x.s00000", "run-x.s00001"
    events = [
        _ev(a, 1, EventType.SESSION_CREATED, 10, model="small"),
        _ev(a, 2, EventType.MODEL_RESPONSE, 11, response={"finish_reason": "length", "model": "small-2025"}),
        _ev(a, 3, EventType.TOOL_CALL, 12, name="submit_result"),
        _ev(a, 4, EventType.TOOL_RESULT, 12, is_error=True, malformed=True),
        _ev(a, 5, EventType.MODEL_RESPONSE, 13, response={"finish_reason": "stop"}),
        _ev(b, 1, EventType.SESSION_CREATED, 1, model="small"),
        _ev(b, 2, EventType.MODEL_RESPONSE, 2, response={"finish_reason": "length"}),  # before the window
        _ev(b, 3, EventType.ROUTE, 20, model="large"),
        _ev(b, 4, EventType.MODEL_RESPONSE, 21, response={"finish_reason": "stop"}),
        _ev(b, 5, EventType.TOOL_RESULT, 22, is_error=True),  # a tool's own error: not malformed
    ]
    verdicts = {
        f"{a}.r0000": {"status": "refute"},
        f"{a}.r0001": {"status": "confirm"},
        f"{a}.r0002": {"status": "unsure"},
        f"{b}.r0000": {"status": "confirm"},
    }
    run = [_ev("run-x", 3, EventType.VERIFICATION, 30, verdicts=verdicts)]
    got = model_signals(events, run, since=5)
    assert got == {
        "large": ModelSignals("large", calls=1, confirmed=1),
        "small": ModelSignals("small", calls=2, truncated=1, tool_calls=1, malformed=1, confirmed=1, refuted=1),
    }
    assert got["small"].agreement == 0.5 and got["small"].truncated_rate == 0.5 and got["small"].malformed_rate == 1


def test_a_model_under_a_threshold_is_demoted_only_with_enough_evidence() -> None:
    policy = QualityPolicy(min_agreement=0.7, max_truncated_rate=0.2, min_calls=10, min_judged=4)
    signals = {
        "bad": ModelSignals("bad", calls=10, truncated=3, tool_calls=10, malformed=1, confirmed=1, refuted=3),
        "thin": ModelSignals("thin", calls=9, truncated=9, confirmed=0, refuted=3),  # too little of each
        "good": ModelSignals("good", calls=50, truncated=1, tool_calls=40, confirmed=9, refuted=1),
    }
    assert demotions(signals, policy) == {"bad": ("verification agreement 25% < 70%", "truncated answers 30% > 20%")}


def test_the_router_passes_over_a_demoted_model_for_new_sessions() -> None:
    router = Router(
        [
            ModelConfig(name="fast", model="m-fast", tier="simple"),
            ModelConfig(name="mid", model="m-mid", tier="medium"),
        ]
    )
    easy = Difficulty(0.1, "difficulty 0.10")
    assert router.route(easy).name == "fast"
    route = router.route(easy, demoted={"m-fast": ("truncated answers 30% > 20%",)})
    assert route.name == "mid"
    assert route.reason == (
        "difficulty 0.10 → tier simple; fast demoted (truncated answers 30% > 20%); "
        "no model fit in tier simple, using medium"
    )
    both = router.route(easy, demoted={"fast": ("x",), "m-mid": ("y",)})
    assert both.name == "fast" and both.reason.endswith("every model left is demoted, using fast")


async def test_recent_signals_sum_the_runs_snapshots_within_the_window() -> None:
    import time

    from agent_fleet.supervise import recent_model_signals, store_model_signals
    from agent_fleet.testing import MemorySessionLog

    log = MemorySessionLog()
    await log.open()
    now = time.time()
    policy = QualityPolicy(window_s=3600, runs=2)
    for n, (age, truncated) in enumerate([(7200, 5), (60, 1), (30, 2), (10, 4)]):
        run = f"run-{n}"
        await log.emit_event(run, EventType.RUN_CREATED, {"task": "t"})
        sid = f"{run}.s00000"
        await log.emit_event(sid, EventType.SESSION_CREATED, {"run_id": run, "index": 0, "model": "m"})
        for k in range(3):
            reason = "length" if k < truncated else "stop"
            await log.emit_event(sid, EventType.MODEL_RESPONSE, {"response": {"finish_reason": reason}})
        await store_model_signals(log, run, await log.events_of_run(run), [], now=now - age)
    got = await recent_model_signals(log, policy, now=now)
    # the two newest runs (3 answers each; 2 and 3 truncated — a run has only 3 answers)
    assert got == {"m": ModelSignals("m", calls=6, truncated=5)}
    await log.close()
