"""The simulation format (SPEC.md "Admission scenarios") and the live controller API."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from admission_builders import cq, flavor, lq

from agent_fleet.admission import AdmissionController, Workload, parse_objects, parse_scenario, simulate
from agent_fleet.clock import VirtualClock
from agent_fleet.errors import ConfigError


def scenario(
    workloads: list[dict[str, Any]],
    events: list[dict[str, Any]] | None = None,
    preemption: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "objects": [
            flavor(),
            cq("cq", {"cpu": 4}, preemption=preemption),
            lq("team-a", "cq"),
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "agent-prod"},
                "value": 100,
            },
        ],
        "workloads": workloads,
        "events": events or [],
    }


# The scenarios below; the Kueue export's round trip runs each of them too.
SCENARIOS: dict[str, dict[str, Any]] = {
    "runtime frees quota": scenario(
        [
            {"name": "w1", "queue": "team-a", "requests": {"cpu": 4}, "createdAt": 0, "runtime": 30},
            {"name": "w2", "queue": "default/team-a", "priority": 5, "requests": {"cpu": 1}, "createdAt": 1},
        ]
    ),
    "preempted runtime restarts": scenario(
        [
            {"name": "low", "queue": "team-a", "requests": {"cpu": 4}, "createdAt": 0, "runtime": 10},
            {
                "name": "high",
                "queue": "team-a",
                "priorityClass": "agent-prod",
                "requests": {"cpu": 4},
                "createdAt": 5,
                "runtime": 10,
            },
        ],
        preemption={"withinClusterQueue": "LowerPriority"},
    ),
    "explicit finish": scenario(
        [
            {"name": "w1", "queue": "team-a", "requests": {"cpu": 4}, "createdAt": 0},
            {"name": "w2", "queue": "team-a", "requests": {"cpu": 4}, "createdAt": 0},
        ],
        events=[{"at": 5, "finish": "w1"}],
    ),
}


def test_runtime_frees_quota_and_the_next_workload_is_admitted_at_that_time() -> None:
    result = simulate(parse_scenario(SCENARIOS["runtime frees quota"]))
    out = result.to_json()
    assert out["final"] == {
        "admitted": ["w2"],
        "pending": {"active": [], "inadmissible": []},
        "finished": ["w1"],
        "preempted": [],
    }
    admitted = [(e["at"], e["workload"]) for e in out["timeline"] if e["event"] == "admitted"]
    assert admitted == [(0, "w1"), (30, "w2")]
    assert {e["event"] for e in out["timeline"]} >= {"created", "admitted", "inadmissible", "finished"}


def test_preempted_workload_restarts_its_runtime_when_readmitted() -> None:
    result = simulate(parse_scenario(SCENARIOS["preempted runtime restarts"]))
    out = result.to_json()
    assert out["final"]["preempted"] == [{"name": "low", "by": "high", "reason": "InClusterQueue"}]
    assert out["final"]["finished"] == ["high", "low"]
    finished = {e["workload"]: e["at"] for e in out["timeline"] if e["event"] == "finished"}
    assert finished == {"high": 15, "low": 25}  # low: readmitted at 15, a full 10 again


def test_explicit_finish_event() -> None:
    result = simulate(parse_scenario(SCENARIOS["explicit finish"]))
    assert result.admitted == ["w2"]
    assert result.finished == ["w1"]


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"name": "w", "queue": "nope", "requests": {"cpu": 1}}, "workload 'w': queue"),
        ({"name": "w", "queue": "team-a", "priorityClass": "vip"}, "workload 'w': priorityClass"),
        ({"name": "w", "queue": "team-a", "requests": {"cpu": "a lot"}}, "workload 'w': requests.cpu"),
        ({"name": "w", "queue": "team-a", "createdAt": -1}, "workload 'w': createdAt"),
        ({"name": "w", "queue": "team-a", "colour": "red"}, "workload 'w': colour"),
    ],
)
def test_invalid_scenarios_name_the_workload_and_field(workload: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        simulate(parse_scenario(scenario([workload])))


def test_unknown_finish_target_is_refused() -> None:
    with pytest.raises(ConfigError, match="event #1: finish"):
        parse_scenario(scenario([], events=[{"at": 1, "finish": "ghost"}]))


async def test_async_runner_admits_on_submit_and_preempts_with_callbacks() -> None:
    clock = VirtualClock()
    seen: list[tuple[str, ...]] = []
    ctl = AdmissionController(
        parse_objects(
            [flavor(), cq("q", {"pods": 1}, preemption={"withinClusterQueue": "LowerPriority"}), lq("q", "q")]
        ),
        clock,
        on_admit=lambda w: seen.append(("admit", w.name, w.owner or "")),
        on_preempt=lambda w, reason, by: seen.append(("preempt", w.name, reason, by.name)),
    )
    stop = asyncio.Event()

    async def idle() -> None:
        # The runner cycles while cycles progress, then waits on its wake event.
        for _ in range(20):
            await asyncio.sleep(0)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(ctl.run(stop))
        ctl.submit(Workload(name="a", queue="q", owner="run-1.s00000"))
        await idle()
        ctl.submit(Workload(name="b", queue="q", priority=10, created=1))
        await idle()
        ctl.finish("b")
        await idle()
        stop.set()
    assert seen == [
        ("admit", "a", "run-1.s00000"),
        ("preempt", "a", "InClusterQueue", "b"),
        ("admit", "b", ""),
        ("admit", "a", "run-1.s00000"),
    ]


def test_snapshot_and_metrics_use_kueue_names() -> None:
    ctl = AdmissionController(parse_objects([flavor(), cq("q", {"pods": 1}), lq("q", "q")]), VirtualClock())
    ctl.submit(Workload(name="a", queue="q"))
    ctl.submit(Workload(name="b", queue="q", created=1))
    ctl.settle()
    (row,) = ctl.snapshot()["cluster_queues"]
    assert (row["admitted"], row["pending_active"], row["pending_inadmissible"]) == (1, 0, 1)
    assert row["resources"][0]["usage"] == "1" and row["resources"][0]["nominal_quota"] == "1"
    text = ctl.metrics_text().decode()
    assert 'kueue_pending_workloads{cluster_queue="q",status="inadmissible"} 1.0' in text
    assert 'kueue_admitted_active_workloads{cluster_queue="q"} 1.0' in text
    assert "kueue_admission_wait_time_seconds_count" in text
    ctl.finish("a")
    ctl.settle()
    assert ctl.admitted() == ["b"]


def test_admission_counters_and_waits_are_exact_when_read_and_past_the_flush_size() -> None:
    from agent_fleet.admission import kueue_metrics as admission_metrics

    clock = VirtualClock()
    ctl = AdmissionController(parse_objects([flavor(), cq("q", {"pods": 5000}), lq("q", "q")]), clock)
    total = admission_metrics._FLUSH_EVERY + 3  # one flush on the way, the rest when read
    for n in range(total):
        ctl.submit(Workload(name=f"w{n}", queue="q", created=n))
    clock.advance(2.5)  # every workload waited 2.5 s
    ctl.settle()
    assert ctl.metrics is not None
    assert 0 < len(ctl.metrics._admitted) < 10  # a flush on the way moved the first batch
    text = ctl.metrics_text().decode()
    assert f'kueue_admitted_workloads_total{{cluster_queue="q"}} {float(total)}' in text
    assert f'kueue_quota_reserved_workloads_total{{cluster_queue="q"}} {float(total)}' in text
    assert f'kueue_admission_wait_time_seconds_count{{cluster_queue="q"}} {float(total)}' in text
    assert f'kueue_admission_wait_time_seconds_sum{{cluster_queue="q"}} {2.5 * total}' in text
    assert 'kueue_admission_wait_time_seconds_bucket{cluster_queue="q",le="1.0"} 0.0' in text
    assert f'kueue_admission_wait_time_seconds_bucket{{cluster_queue="q",le="5.0"}} {float(total)}' in text
    assert f'kueue_admission_attempts_total{{result="success"}} {float(total)}' in text


def test_submit_refuses_unknown_queue_and_duplicates() -> None:
    ctl = AdmissionController(parse_objects([flavor(), cq("q", {"pods": 1}), lq("q", "q")]), VirtualClock())
    with pytest.raises(ConfigError, match="queue"):
        ctl.submit(Workload(name="a", queue="nope"))
    ctl.submit(Workload(name="a", queue="q"))
    with pytest.raises(ConfigError, match="already submitted"):
        ctl.submit(Workload(name="a", queue="q"))
