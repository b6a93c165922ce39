"""The review queue and the decision audit as pure functions of a run's events."""

from __future__ import annotations

from typing import Any

from agent_fleet.config import SupervisionConfig
from agent_fleet.domain.events import Event, EventType
from agent_fleet.supervise import (
    Decision,
    ReviewKind,
    ReviewStatus,
    audit_markdown,
    decision_audit,
    queue_counts,
    review_queue,
    run_of_item,
)
from agent_fleet.supervise.queue import decision_event

RUN = "run-q"
S1, S2, S3, S4 = (f"{RUN}.s{n:05d}" for n in range(1, 5))


class Log:
    def __init__(self) -> None:
        self.run: list[Event] = []
        self.agent: list[Event] = []
        self._seq: dict[str, int] = {}
        self.t = 100.0

    def add(self, sid: str, type: str, **data: Any) -> Event:
        self._seq[sid] = self._seq.get(sid, 0) + 1
        self.t += 1
        ev = Event(sid, self._seq[sid], type, self.t, data)
        (self.run if sid == RUN else self.agent).append(ev)
        return ev

    def agent_sorted(self) -> list[Event]:
        return sorted(self.agent, key=lambda e: (e.session_id, e.seq))


def _run() -> Log:
    log = Log()
    log.add(RUN, EventType.RUN_CREATED, task="t")
    log.add(S1, EventType.SESSION_STARTED)
    log.add(S1, EventType.RESULT_ITEM, id=f"{S1}.r0000", title="sure", body="b", confidence=0.9)
    log.add(S1, EventType.RESULT_ITEM, id=f"{S1}.r0001", title="doubtful", body="b", confidence=0.2)
    log.add(S1, EventType.RESULT_ITEM, id=f"{S1}.r0002", title="no confidence", body="b")
    log.add(S1, EventType.SESSION_COMPLETED)
    log.add(S2, EventType.SESSION_STARTED)
    log.add(S2, EventType.SESSION_PAUSED, reason="repeated_tool_call", message="read_file 5 turns in a row")
    log.add(S3, EventType.SESSION_PAUSED, reason="budget", detail="session: token budget reached")
    log.add(S3, EventType.SESSION_RESUMED)
    log.add(S4, EventType.SESSION_FAILED, error="provider down", attempts=3)
    verdicts = {
        f"{S1}.r0000": {"status": "confirm", "reason": "ok"},
        f"{S1}.r0001": {"status": "refute", "reason": "not in the file"},
        f"{S1}.r0002": {"status": "unsure", "reason": "cannot tell"},
    }
    log.add(RUN, EventType.VERIFICATION, verdicts=verdicts)
    log.add(RUN, EventType.ALARM, kind="verification_agreement", message="agreement 50% is below 80%")
    log.add(RUN, EventType.ALARM, kind="shape.outlier", subject=S2, session_id=S2, message="tool calls 20 vs 2")
    return log


def test_every_kind_of_exception_is_an_item_and_nothing_else() -> None:
    log = _run()
    items = review_queue(RUN, log.run, log.agent_sorted(), SupervisionConfig())
    by_id = {i.id: i for i in items}
    assert set(by_id) == {
        f"low_confidence:{S1}.r0001",
        f"refuted:{S1}.r0001",
        f"unsure:{S1}.r0002",
        f"agreement:{RUN}",
        f"shape.outlier:{S2}",
        f"paused:{S2}",
        f"paused:{S3}",
        f"out_of_attempts:{S4}",
    }
    assert by_id[f"paused:{S3}"].status is ReviewStatus.RESOLVED  # it resumed
    assert by_id[f"paused:{S2}"].status is ReviewStatus.OPEN and "repeated_tool_call" in by_id[f"paused:{S2}"].reason
    assert by_id[f"shape.outlier:{S2}"].kind is ReviewKind.SHAPE and by_id[f"shape.outlier:{S2}"].session_id == S2
    assert by_id[f"low_confidence:{S1}.r0001"].session_id == S1
    assert [i.time for i in items] == sorted(i.time for i in items)
    assert all(run_of_item(i.id) == RUN for i in items)


def test_thresholds_are_policy() -> None:
    log = _run()
    strict = SupervisionConfig(confidence_threshold=0.95, review_unsure=False)
    ids = {i.id for i in review_queue(RUN, log.run, log.agent_sorted(), strict)}
    assert f"low_confidence:{S1}.r0000" in ids and f"unsure:{S1}.r0002" not in ids


def test_the_latest_decision_counts_and_the_audit_shows_it() -> None:
    log = _run()
    items = {i.id: i for i in review_queue(RUN, log.run, log.agent_sorted(), SupervisionConfig())}
    shape = items[f"shape.outlier:{S2}"]
    log.add(RUN, EventType.REVIEW_DECISION, **decision_event(shape, Decision.REJECT, "first look"))
    log.add(RUN, EventType.REVIEW_DECISION, **decision_event(shape, Decision.APPROVE, "a known slow file"))
    decided = {i.id: i for i in review_queue(RUN, log.run, log.agent_sorted(), SupervisionConfig())}
    assert decided[shape.id].status is ReviewStatus.APPROVED and decided[shape.id].note == "a known slow file"
    assert decided[shape.id].decided_at == log.run[-1].time
    counts = queue_counts(decided.values())
    assert (counts["open"], counts["approved"], counts["resolved"]) == (6, 1, 1)
    assert counts["open_by_kind"]["paused"] == 1

    log.add(S1, EventType.ROUTE, model="m-small", name="fast", tier="simple", reason="difficulty 0.2")
    log.add(S1, EventType.ROUTE, model="m-large", name="deep", tier="complex", reason="fast server error")
    log.add(S2, EventType.ROUTE, model="m-small", name="fast", tier="simple", reason="difficulty 0.2")
    log.add(S2, EventType.SESSION_PREEMPTED, reason="InCohortReclamation", by="other")
    log.add(S3, EventType.SESSION_CREATED, model="m-run")  # no routing: the run's own model
    log.add(RUN, EventType.MODEL_DEMOTED, model="m-mid", reasons=["truncated answers 40% > 20%"])
    audit = decision_audit(log.run, log.agent_sorted(), list(decided.values()))
    assert audit["routes"] == {"fast": 2, "m-run": 1}
    assert (audit["fallbacks"], audit["escalations"]) == (1, 1)
    assert audit["pauses"] == {"budget": 1, "repeated_tool_call": 1}
    assert audit["preemptions"] == {"InCohortReclamation": 1}
    assert audit["alarms"] == {"shape.outlier": 1, "verification_agreement": 1}
    assert audit["reviews"]["approved"] == 1 and audit["reviews"]["total"] == 8
    assert audit["decisions"] == [{"item": shape.id, "decision": "approved", "note": "a known slow file"}]
    md = audit_markdown(audit, list(decided.values()))
    assert md.startswith("## Decisions") and "m-mid (truncated answers 40% > 20%)" in md
    assert f"| `{shape.id}` | approved (a known slow file) |" in md


def test_item_ids_name_their_run() -> None:
    assert run_of_item(f"refuted:{S1}.r0003") == RUN
    assert run_of_item(f"shape.repeated_call:{RUN}#ab12") == RUN
    assert run_of_item("nonsense") is None and run_of_item("kind:") is None
