"""Two teams share a cohort and run live fleets against the simulated provider.

team-b starts first and borrows the whole cohort; team-a (the lender, ``reclaimWithinCohort:
Any``) then starts its own run. Kueue reclaims team-a's quota: team-b's borrowing sessions are
preempted in flight with reason ``InCohortReclamation``, pause, wait for readmission, resume from
their session log and finish. Both runs complete and every partition's results are exactly the
ones its items call for: none lost, none recorded twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from agent_fleet.admission import AdmissionController, load_kueue_yaml
from agent_fleet.admission.workload_slots import AdmissionSlots
from agent_fleet.clock import RealClock
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.plan import Plan
from agent_fleet.engine import RunOptions, RunReport, deploy
from agent_fleet.session import open_store
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.items import note_for_item
from agent_fleet.sim.provider import SimConfig

from .conftest import write_lines

LENDER_PODS = 4
BORROWER_PODS = 1
COHORT_PODS = LENDER_PODS + BORROWER_PODS


def cohort_yaml(queues: dict[str, tuple[int, bool]], priority_classes: dict[str, int] | None = None) -> str:
    """Kueue objects: one ResourceFlavor, a ClusterQueue per ``name: (nominal pods, reclaims)`` in the
    cohort ``research`` (``reclaimWithinCohort: Any`` where it reclaims), a LocalQueue of the same name
    in ``default`` for each, and the WorkloadPriorityClasses given."""
    docs = ["apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n"]
    for name, value in (priority_classes or {}).items():
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {{name: {name}}}\n"
                    f"value: {value}\n")  # fmt: skip
    for name, (pods, reclaims) in queues.items():
        preemption = "  preemption: {reclaimWithinCohort: Any}\n" if reclaims else ""
        docs.append(
            f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n"
            f"  cohortName: research\n  namespaceSelector: {{}}\n{preemption}  resourceGroups:\n"
            f"  - coveredResources: [pods]\n    flavors:\n    - name: default\n"
            f"      resources: [{{name: pods, nominalQuota: {pods}}}]\n"
        )
        docs.append(
            f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: {name}, namespace: default}}\n"
            f"spec: {{clusterQueue: {name}}}\n"
        )
    return "---\n".join(docs)


KUEUE_YAML = cohort_yaml({"team-a": (LENDER_PODS, True), "team-b": (BORROWER_PODS, False)})


def _usage(ctl: AdmissionController, cluster_queue: str) -> float:
    row = next(r for r in ctl.snapshot()["cluster_queues"] if r["name"] == cluster_queue)
    return float(sum(res["usage_count"] for res in row["resources"]))


async def _run_events(store: str, run_id: str) -> tuple[Plan, list[Event]]:
    async with open_store(store) as log:
        run_events = await log.get_events(run_id)
        events = await log.events_of_run(run_id)
    plan = Plan.from_dict(next(e for e in run_events if e.type == EventType.PLAN).data["plan"])
    return plan, events


def _check_results(plan: Plan, events: list[Event]) -> None:
    """Each partition's raw results are exactly one note per item of that partition."""
    got: dict[str, Counter[tuple[str, str]]] = {}
    for e in events:
        if e.type == EventType.RESULT_ITEM:
            got.setdefault(e.data["partition_id"], Counter())[(e.data["title"], e.data["body"])] += 1
    for p in plan.partitions:
        want = Counter((n["title"], n["body"]) for n in map(note_for_item, p.items))
        assert got.get(p.id) == want, f"partition {p.id}: results differ from its items"
    assert set(got) <= {p.id for p in plan.partitions}


async def test_lender_reclaims_from_a_borrowing_fleet(tmp_path: Path) -> None:
    ctl = AdmissionController(load_kueue_yaml(KUEUE_YAML), RealClock())
    stop = asyncio.Event()
    reports: dict[str, RunReport] = {}
    stores = {team: f"sqlite:///{tmp_path / (team + '.db')}" for team in ("team-a", "team-b")}
    borrowed_fully = asyncio.Event()
    max_b_usage = 0.0

    async with SimProvider(SimConfig(latency=0.4, seed=11)) as sim:

        def options(team: str, lines: int, agents: int) -> RunOptions:
            src = write_lines(tmp_path / f"{team}.txt", lines)
            return RunOptions(
                task=f"Summarise each page for {team}",
                input_path=str(src),
                agents=agents,
                provider=sim.base_url,
                embedder="lexical",
                out_dir=str(tmp_path / "out" / team),
            )

        async def run(team: str, opts: RunOptions) -> None:
            slots = AdmissionSlots(ctl, queue=team, drive=False)
            reports[team] = await deploy(opts, store_url=stores[team], api_key="sk-test", slots=slots)

        async def watch_borrower() -> None:
            nonlocal max_b_usage
            while not stop.is_set():
                max_b_usage = max(max_b_usage, _usage(ctl, "team-b"))
                if max_b_usage == COHORT_PODS:
                    borrowed_fully.set()
                await asyncio.sleep(0.02)

        async def lender_arrives() -> None:
            await borrowed_fully.wait()
            # Let the borrower's sessions get work done first: a reclaimed session is in flight.
            await asyncio.sleep(0.6)
            await run("team-a", options("team-a", 40, LENDER_PODS))

        async with asyncio.timeout(120), asyncio.TaskGroup() as tg:
            tg.create_task(ctl.run(stop))
            tg.create_task(watch_borrower())
            runs = [
                tg.create_task(run("team-b", options("team-b", 120, 12))),
                tg.create_task(lender_arrives()),
            ]
            await asyncio.wait(runs)
            stop.set()

    assert max_b_usage == COHORT_PODS  # team-b borrowed the whole cohort
    for team in ("team-a", "team-b"):
        assert reports[team].status == "completed", reports[team].summary
        plan, events = await _run_events(stores[team], reports[team].run_id)
        _check_results(plan, events)
        assert reports[team].summary["sessions"]["completed"] == len(plan.partitions)

    _, events = await _run_events(stores["team-b"], reports["team-b"].run_id)
    preempted = [e for e in events if e.type == EventType.SESSION_PREEMPTED]
    assert preempted, "no team-b session was preempted"
    assert {e.data["reason"] for e in preempted} == {"InCohortReclamation"}
    # the preemptor is named, and it is one of team-a's sessions
    a_run = reports["team-a"].run_id
    assert all(str(e.data["by"]).startswith(a_run) for e in preempted), [e.data["by"] for e in preempted]
    by_session: dict[str, list[Event]] = {}
    for e in events:
        by_session.setdefault(e.session_id, []).append(e)
    kept_work = 0
    for sid in {e.session_id for e in preempted}:
        types = [e.type for e in sorted(by_session[sid], key=lambda e: e.seq)]
        last_preempt = max(i for i, t in enumerate(types) if t == EventType.SESSION_PREEMPTED)
        # paused, then resumed and finished after its (last) preemption
        assert EventType.SESSION_COMPLETED in types[last_preempt:], types
        first_preempt = types.index(EventType.SESSION_PREEMPTED)
        kept_work += EventType.RESULT_ITEM in types[:first_preempt]
    assert kept_work >= 1, "no session was preempted in flight with results already recorded"
    assert not ctl.workloads, f"workloads left behind: {sorted(ctl.workloads)}"
    assert _usage(ctl, "team-a") == _usage(ctl, "team-b") == 0
