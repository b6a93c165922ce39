"""Pure parts of the dashboard: session figures, budget share, merging stored metrics, quantiles."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agent_fleet.admission import AdmissionController, default_objects
from agent_fleet.clock import VirtualClock
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.model import ChatResponse
from agent_fleet.domain.usage import Usage
from agent_fleet.observe.dashboard.figures import Budget, SessionFigures, budget_of_run, used_ratio
from agent_fleet.observe.dashboard.merge import histogram_quantile, merge_texts
from agent_fleet.observe.metrics import FleetSnapshot, render


def _ev(seq: int, type: str, **data: object) -> Event:
    return Event("r.s00000", seq, type, 100.0 + seq, dict(data))


def _resp(inp: int, out: int, usd: str, retried: tuple[str, ...] = ()) -> dict[str, object]:
    return ChatResponse(
        content="x", usage=Usage(inp, out), model="m2", cost_usd=Decimal(usd), retried=retried
    ).to_dict()


def test_session_figures_fold_each_event_once() -> None:
    figs = SessionFigures("r.s00000")
    events = [
        _ev(1, EventType.SESSION_CREATED, model="m1"),
        _ev(2, EventType.MODEL_REQUEST, turn=1, model="m1"),
        _ev(3, EventType.MODEL_RESPONSE, response=_resp(100, 20, "0.001", ("rate_limited",))),
        _ev(4, EventType.TOOL_CALL, call_id="c", name="read_file", arguments={}),
        _ev(5, EventType.MODEL_REQUEST, turn=2, model="m3"),
        _ev(6, EventType.MODEL_ERROR, turn=2, error="boom"),
        _ev(7, EventType.RESULT_ITEM, text="a"),
        _ev(8, EventType.SESSION_PREEMPTED, reason="InCohortReclamation"),
        _ev(9, EventType.SESSION_PAUSED, reason="budget"),
        _ev(10, EventType.BUDGET_RAISED, tokens=1000),
    ]
    for ev in events + events[:4]:  # a repeat is ignored
        figs.fold(ev)
    row = figs.to_row(Budget(tokens=240))
    assert (row["turns"], row["tool_calls"], row["calls"], row["errors"]) == (2, 1, 1, 2)
    assert (row["tokens"], row["cost_usd"], row["results"], row["preemptions"]) == (120, 0.001, 1, 1)
    assert row["model"] == "m3"  # the model of the latest request
    assert row["pause_reason"] == "budget"
    assert row["last_event"] == EventType.BUDGET_RAISED
    # the raise on the session replaced its token cap: 120 of 1000
    assert row["budget_used_ratio"] == 0.12
    figs.fold(_ev(11, EventType.SESSION_RESUMED))
    assert figs.pause_reason is None


def test_used_ratio_is_the_tightest_cap() -> None:
    assert used_ratio(50, Decimal("0.9"), Budget(tokens=100, usd=Decimal("1"))) == 0.9
    assert used_ratio(80, Decimal("0.1"), Budget(tokens=100, usd=Decimal("1"))) == 0.8
    assert used_ratio(80, Decimal("5"), Budget(tokens=None, usd=None)) == 0.0
    assert budget_of_run({"budget_tokens": 500, "budget_usd": "0.25"}) == Budget(500, Decimal("0.25"))
    assert budget_of_run({}) == Budget(128_000, None)
    assert Budget(500, None).raised(usd=Decimal("2")) == Budget(500, Decimal("2"))


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = {0.1: 10.0, 0.5: 60.0, 1.0: 100.0, float("inf"): 100.0}
    # rank 95 of 100 falls in (0.5, 1.0]: 0.5 + 0.5 * (95 - 60) / 40
    assert histogram_quantile(0.95, buckets) == pytest.approx(0.9375)
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * 40 / 50)
    assert histogram_quantile(0.95, {0.1: 0.0, float("inf"): 0.0}) is None
    assert histogram_quantile(0.99, {1.0: 1.0, float("inf"): 3.0}) == 1.0  # above the last finite edge


def _admission_text(admitted_waits: list[float], preempted: int) -> str:
    controller = AdmissionController(default_objects(4), VirtualClock())
    assert controller.metrics is not None
    for wait in admitted_waits:
        controller.metrics.record_admission("default", wait)
    for _ in range(preempted):
        controller.metrics.preempted_total.labels("default", "InCohortReclamation").inc()
    return controller.metrics_text().decode()


def _fleet_text(run: str, limit: int) -> str:
    snap = FleetSnapshot(run_id=run, models={}, concurrency_limit=limit, in_flight=0, sessions={"active": 2})
    return render(snap).decode()


def test_merge_sums_kueue_families_and_keeps_runs_apart() -> None:
    a = _fleet_text("run-a", 8) + _admission_text([0.2, 0.3], 1)
    b = _fleet_text("run-b", 16) + _admission_text([2.0], 2)
    merged = merge_texts([(a, True), (b, True)])
    admitted = merged.values("kueue_admitted_workloads_total")
    assert admitted == {(("cluster_queue", "default"),): 3.0}
    preempted = merged.values("kueue_preempted_workloads_total")
    assert preempted == {(("preempting_cluster_queue", "default"), ("reason", "InCohortReclamation")): 3.0}
    limits = merged.values("fleet_api_concurrency_limit")
    assert limits == {(("run", "run-a"),): 8.0, (("run", "run-b"),): 16.0}
    count = merged.values("kueue_admission_wait_time_seconds_count")
    assert count == {(("cluster_queue", "default"),): 3.0}
    # one family per name in the output, parsable again
    text = b"".join(f.name.encode() + b"\n" for f in merged.families())
    assert text.count(b"kueue_admitted_workloads\n") == 1


def test_merge_drops_the_kueue_gauges_of_finished_runs() -> None:
    live = _admission_text([0.1], 0)
    done = _admission_text([0.1, 0.1], 0)
    merged = merge_texts([(live, True), (done, False)])
    assert merged.values("kueue_admitted_workloads_total") == {(("cluster_queue", "default"),): 3.0}
    pending = merged.values("kueue_pending_workloads")
    assert pending[(("cluster_queue", "default"), ("status", "active"))] == 0.0
    nominal = merged.values("kueue_cluster_queue_nominal_quota")
    assert sum(nominal.values()) == 4.0  # the live run's quota only, not both


def _shared_controller_copies() -> tuple[str, str, str]:
    """Two copies of one controller's metrics taken at two moments (as two runs of one server store
    them), and a third controller's."""
    controller = AdmissionController(default_objects(4), VirtualClock())
    assert controller.metrics is not None
    for _ in range(3):
        controller.metrics.attempts_total.labels("success").inc()
    controller.metrics.preempted_total.labels("team-b", "InCohortReclamation").inc()
    earlier = controller.metrics_text().decode()
    controller.metrics.attempts_total.labels("success").inc()
    controller.metrics.preempted_total.labels("team-b", "InCohortReclamation").inc(4)
    later = controller.metrics_text().decode()
    return earlier, later, _admission_text([0.1], 2)


def test_copies_of_one_controller_count_once_from_the_latest() -> None:
    earlier, later, other = _shared_controller_copies()
    key = (("preempting_cluster_queue", "team-b"), ("reason", "InCohortReclamation"))
    # whichever order the runs come in, and whether the latest copy's run is still live
    for entries in (
        [(later, True, "c1"), (earlier, True, "c1")],
        [(earlier, True, "c1"), (later, True, "c1")],
        [(earlier, False, "c1"), (later, False, "c1")],
    ):
        merged = merge_texts(entries)
        assert merged.values("kueue_preempted_workloads_total")[key] == 5.0
    # a live copy's gauges are kept even when an ended run stored a later copy
    merged = merge_texts([(later, False, "c1"), (earlier, True, "c1")])
    assert merged.values("kueue_preempted_workloads_total")[key] == 1.0
    assert sum(merged.values("kueue_cluster_queue_nominal_quota").values()) == 4.0
    # another controller (or a text of no known source) still adds up
    merged = merge_texts([(later, True, "c1"), (earlier, True, "c1"), (other, True, "c2"), (other, True)])
    by_reason = merged.values("kueue_preempted_workloads_total")
    assert by_reason[key] == 5.0
    assert by_reason[(("preempting_cluster_queue", "default"), ("reason", "InCohortReclamation"))] == 4.0
