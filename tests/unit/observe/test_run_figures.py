"""A run's status figures read from the log equal the figures of all its events (what summary.json shows)."""

from __future__ import annotations

from dashboard_builders import answer, create_run

from agent_fleet.domain.events import EventType
from agent_fleet.observe.summary import read_run_figures, run_figures
from agent_fleet.session.memory import MemorySessionLog


async def test_status_figures_count_the_sends_a_crash_left_unanswered() -> None:
    log = MemorySessionLog()
    await log.open()
    try:
        first, second = await create_run(log, "run-1", 2)
        await answer(log, first, tokens=(100, 20), usd="0.01")
        # a resumed session charged its unanswered send at the reservation, then sent it again
        resent = {"turn": 1, "usage": {"input_tokens": 300, "output_tokens": 50}, "tokens": 350, "cost_usd": "0.02"}
        await log.emit_event(second, EventType.MODEL_RESENT, resent)
        await answer(log, second, tokens=(300, 40), usd="0.02")
        await log.emit_event(second, EventType.SESSION_COMPLETED, {})

        status = await read_run_figures(log, "run-1")

        sessions = await log.list_sessions("run-1")
        every_event = await log.events_of_run("run-1")
        summary = run_figures(sessions, every_event, await log.get_events("run-1")).to_summary()
    finally:
        await log.close()
    assert status["llm_calls"] == 2
    assert status["llm_calls_resent"] == 1
    assert status["tokens_resent"] == {"input": 300, "output": 50, "total": 350}
    assert status["cost_usd_resent"] == "0.02"
    assert status["sessions"] == {"created": 1, "completed": 1} and status["partitions"] == 2
    assert {k: v for k, v in status.items() if k not in ("sessions", "partitions")} == {
        k: v for k, v in summary.items() if k != "sessions"
    }
