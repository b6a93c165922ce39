"""LangGraph's real package drives the fleet: ``fleet_node`` in a compiled ``StateGraph``.

* a graph with a fleet node over 200 items completes, every item's result once;
* the graph process killed with SIGKILL mid-fleet and restarted from its checkpointer (SQLite, and
  PostgreSQL) finishes *the same* fleet run: one run in the store, every item's result recorded once,
  and the simulated provider's bill at most an uninterrupted run's plus the calls in flight at the kill;
* a budget pause comes back as a LangGraph interrupt; answering it with a raise completes the run, and
  an answer replayed when the node runs again is not applied twice.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from _langgraph_child import lines
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.errors import UsageError
from agent_fleet.integrations.langgraph import fleet_node, fleet_sends
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, sim_provider_process

CHILD = Path(__file__).with_name("_langgraph_child.py")
PG_URL = os.environ.get("FLEET_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
KEY = "sk-langgraph-test-" + "7c1e" * 4
CHAT = "/v1/chat/completions"


class State(TypedDict, total=False):
    items: list[str]
    results: list[dict[str, Any]]
    fleet_run_id: str
    fleet_cost_usd: float


class FanState(TypedDict, total=False):
    urls: list[str]
    items: list[str]
    results: Annotated[list[dict[str, Any]], operator.add]  # parallel branches add theirs
    runs: Annotated[list[dict[str, Any]], operator.add]


def sim_get(url: str, path: str, *, post: bool = False) -> dict[str, Any]:
    req = urllib.request.Request(url.removesuffix("/v1") + path, method="POST" if post else "GET")
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


def served(url: str) -> int:
    """Chat calls the simulated provider answered."""
    return int(sim_get(url, "/sim/stats")["requests"].get(CHAT, {}).get("200", 0))


def items_in(results: list[dict[str, Any]], items: list[str]) -> Counter[str]:
    """How often each item's text appears in these results (each result quotes its item)."""
    quoted = Counter(str(r["body"]).split('"')[1] for r in results)
    return Counter({i: quoted[i] for i in items})


async def run_events(store: str, run_id: str) -> tuple[list[str], list[Any], list[Any]]:
    async with open_store(store) as log:
        runs = [r.session_id for r in await log.list_runs()]
        raw = await log.events_of_run(run_id, [EventType.RESULT_ITEM])
        own = await log.get_events(run_id)
    return runs, raw, own


@pytest.fixture(scope="module")
def quick_sim() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        yield url


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # runs write their outputs under ./.fleet/runs/RUN_ID


def graph_for(node: Any) -> StateGraph[State]:
    graph: StateGraph[State] = StateGraph(State)
    graph.add_node("fleet", node)
    graph.add_edge(START, "fleet")
    graph.add_edge("fleet", END)
    return graph


async def test_a_fleet_node_over_200_items_completes(quick_sim: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node("Classify each line", agents=10, provider=quick_sim, store=store, api_key=KEY, embedder="lexical")
    app = graph_for(node).compile(checkpointer=InMemorySaver())
    items = lines(200)
    before = served(quick_sim)
    final = await app.ainvoke({"items": items}, {"configurable": {"thread_id": "t"}})
    assert set(items_in(final["results"], items).values()) == {1}  # every item's result, once
    runs, raw, own = await run_events(store, final["fleet_run_id"])
    assert runs == [final["fleet_run_id"]]
    assert len(raw) == 200
    assert own[-1].type == EventType.RUN_COMPLETED
    summary = json.loads((tmp_path / ".fleet" / "runs" / final["fleet_run_id"] / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["results_unique"] == 200
    assert final["fleet_cost_usd"] == summary["cost_usd"] > 0
    assert served(quick_sim) - before > 0


def test_the_sync_graph_api_runs_the_same_node(quick_sim: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node("Classify", agents=3, provider=quick_sim, store=store, api_key=KEY, embedder="lexical")
    with SqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as saver:
        app = graph_for(node).compile(checkpointer=saver)
        items = lines(12)
        final = app.invoke({"items": items}, {"configurable": {"thread_id": "t"}})
    assert set(items_in(final["results"], items).values()) == {1}
    assert final["fleet_run_id"].startswith("run-")


def test_a_run_id_already_in_the_state_is_continued_not_restarted(quick_sim: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node("Classify", agents=2, provider=quick_sim, store=store, api_key=KEY, embedder="lexical")
    app = graph_for(node).compile()
    items = lines(6)
    first = app.invoke({"items": items})
    calls = served(quick_sim)
    again = app.invoke({"items": items, "fleet_run_id": first["fleet_run_id"]})
    assert again["fleet_run_id"] == first["fleet_run_id"]
    assert again["results"] == first["results"]
    assert served(quick_sim) == calls  # a finished run is read back, not run again
    runs, _, _ = asyncio.run(run_events(store, first["fleet_run_id"]))
    assert runs == [first["fleet_run_id"]]


def test_send_fan_out_runs_one_fleet_run_per_packet(quick_sim: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node(
        "Classify", agents=2, provider=quick_sim, store=store, api_key=KEY, embedder="lexical", runs_key="runs"
    )
    graph: StateGraph[FanState] = StateGraph(FanState)
    graph.add_node("fleet", node)
    graph.add_conditional_edges(START, lambda s: fleet_sends("fleet", s["urls"], per_run=5), ["fleet"])
    graph.add_edge("fleet", END)
    items = lines(12)
    final = graph.compile(checkpointer=InMemorySaver()).invoke({"urls": items}, {"configurable": {"thread_id": "f"}})
    assert sorted(r["items"] for r in final["runs"]) == [2, 5, 5]
    assert len({r["run_id"] for r in final["runs"]}) == 3
    assert set(items_in(final["results"], items).values()) == {1}


def test_bad_options_and_items_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown deploy option"):
        fleet_node("t", budget_token=5)
    with pytest.raises(UsageError, match="budget-tokens"):
        fleet_node("t", budget_tokens=0)
    node = fleet_node("t", store=f"sqlite:///{tmp_path / 'f.db'}")
    with pytest.raises(UsageError, match="non-blank line"):
        graph_for(node).compile().invoke({"items": ["one", "two\nlines"]})


# -- a budget pause as an interrupt ---------------------------------------------------------------


def test_a_budget_pause_is_an_interrupt_and_a_raise_completes_the_run(quick_sim: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node(
        "Classify", agents=4, provider=quick_sim, store=store, api_key=KEY, embedder="lexical", budget_tokens=800
    )
    items = lines(40)
    config: Any = {"configurable": {"thread_id": "budget"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as saver:
        app = graph_for(node).compile(checkpointer=saver)
        paused = app.invoke({"items": items}, config)
        (question,) = paused["__interrupt__"]
        run_id = question.value["fleet_run_id"]
        assert question.value["reason"] == "budget" and question.value["sessions"]["paused"] == 4
        assert asyncio.run(_state(store, run_id)) is SessionState.PAUSED
        # a raise too small for the whole run: the run pauses again, a second interrupt
        again = app.invoke(Command(resume={"tokens": 1200}), config)
        (second,) = again["__interrupt__"]
        assert second.value["fleet_run_id"] == run_id
        # the node runs again from its start: the first answer comes back, and must not be applied again
        final = app.invoke(Command(resume={"tokens": 1_000_000}), config)
    assert final["fleet_run_id"] == run_id
    assert set(items_in(final["results"], items).values()) == {1}
    runs, raw, own = asyncio.run(run_events(store, run_id))
    assert runs == [run_id] and len(raw) == 40
    raises = [e.data for e in own if e.type == EventType.BUDGET_RAISED]
    assert [(r["tokens"], r["langgraph"]["answer"]) for r in raises] == [(1200, 0), (1_000_000, 1)]
    assert own[-1].type == EventType.RUN_COMPLETED


def test_stop_takes_the_results_so_far(quick_sim: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node(
        "Classify", agents=2, provider=quick_sim, store=store, api_key=KEY, embedder="lexical", budget_tokens=50
    )
    config: Any = {"configurable": {"thread_id": "stop"}}
    app = graph_for(node).compile(checkpointer=InMemorySaver())
    items = lines(8)
    paused = app.invoke({"items": items}, config)
    run_id = paused["__interrupt__"][0].value["fleet_run_id"]
    so_far = paused["__interrupt__"][0].value["results_so_far"]
    final = app.invoke(Command(resume={"stop": True}), config)
    # every session was paused after its first call, which already reported its item
    assert final["fleet_run_id"] == run_id and len(final["results"]) == so_far == 8
    assert set(items_in(final["results"], items).values()) == {1}
    assert asyncio.run(_state(store, run_id)) is SessionState.PAUSED  # resumable later


async def _state(store: str, run_id: str) -> SessionState | None:
    async with open_store(store) as log:
        rec = await log.get_session(run_id)
    return rec.state if rec is not None else None


# -- kill -9 of the graph process -----------------------------------------------------------------

ITEMS = 200


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[str]:
    # 0.3 s a call: a 200-item run takes some seconds, long enough to be killed halfway
    with sim_provider_process(SimConfig(latency=0.3)) as url:
        yield url


def child(spec: str, thread: str, mode: str, workdir: Path, url: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
    env.update(FLEET_BASE_URL=url, FLEET_API_KEY=KEY, FLEET_STORE=f"sqlite:///{workdir / 'fleet.db'}")
    args = [sys.executable, str(CHILD), spec, thread, mode, *([str(ITEMS)] if mode == "start" else [])]
    return subprocess.Popen(args, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def reference_bill(slow_sim: str, tmp_path_factory: pytest.TempPathFactory) -> int:
    """What one uninterrupted run of the same graph costs the provider, in chat calls."""
    workdir = tmp_path_factory.mktemp("reference")
    before = served(slow_sim)
    final = finish(child(f"sqlite:{workdir / 'cp.db'}", "ref", "start", workdir, slow_sim))
    assert len(final["results"]) == ITEMS
    return served(slow_sim) - before


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'checkpoints.db'}"
        return
    import psycopg

    schema = f"lg_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_kill9_mid_fleet_then_restart_from_the_checkpointer_finishes_the_same_run(
    slow_sim: str, reference_bill: int, checkpointer: str, tmp_path: Path
) -> None:
    start = served(slow_sim)
    proc = child(checkpointer, "crash", "start", tmp_path, slow_sim)
    deadline = time.monotonic() + 180
    # a third of the run's calls answered, and calls out: kill them in the middle of being served
    while served(slow_sim) - start < reference_bill // 3 or not sim_get(slow_sim, "/sim/stats")["in_flight"]:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the fleet never got going"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    (run_id,), raw_before, _ = asyncio.run(run_events(store, _only_run(store)))
    # In flight at the kill: calls the log says were sent and never answered (the provider may have
    # answered some of them already — it bills those — but the answer was not recorded).
    in_flight = asyncio.run(unanswered(store, run_id))
    assert 0 < in_flight <= 10  # at most one call out per session
    assert asyncio.run(_state(store, run_id)) is not SessionState.COMPLETED
    assert 0 < len(raw_before) < ITEMS  # killed mid-fleet

    final = finish(child(checkpointer, "crash", "resume", tmp_path, slow_sim))
    assert final["fleet_run_id"] == run_id  # the same fleet run, continued
    runs, raw, own = asyncio.run(run_events(store, run_id))
    assert runs == [run_id]  # and no other was started
    items = lines(ITEMS)
    assert set(items_in([e.data for e in raw], items).values()) == {1}  # every item's result recorded once
    assert set(items_in(final["results"], items).values()) == {1}
    assert own[-1].type == EventType.RUN_COMPLETED
    bill = served(slow_sim) - start
    # The calls out at the kill are at most one per running session (10); the log's count of them
    # misses a call sent while its request event was still being written.
    assert reference_bill <= bill <= reference_bill + 10, (bill, reference_bill, in_flight)
    summary = json.loads((tmp_path / ".fleet" / "runs" / run_id / "summary.json").read_text())
    assert summary.get("llm_calls_resent", 0) <= in_flight


async def unanswered(store: str, run_id: str) -> int:
    async with open_store(store) as log:
        events = await log.events_of_run(run_id, [EventType.MODEL_REQUEST, EventType.MODEL_RESPONSE])
    sent = Counter(e.session_id for e in events if e.type == EventType.MODEL_REQUEST)
    answered = Counter(e.session_id for e in events if e.type == EventType.MODEL_RESPONSE)
    return sum((sent - answered).values())


def _only_run(store: str) -> str:
    async def go() -> str:
        async with open_store(store) as log:
            (rec,) = await log.list_runs()
        return rec.session_id

    return asyncio.run(go())


class CodeState(TypedDict, total=False):
    results: list[dict[str, Any]]
    fleet_run_id: str
    fleet_cost_usd: float
    fleet_changes: dict[str, Any]


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("bwrap"), reason="root without bubblewrap")
def test_a_fleet_node_over_a_codebase_returns_its_changes(quick_sim: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(3):
        (repo / f"m{i}.py").write_text(f"x = {i}\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "b"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    edit = 'while read p; do echo "# reviewed" >> "$p"; done < "$FLEET_PARTITION"'
    store = f"sqlite:///{tmp_path / 'fleet.db'}"
    node = fleet_node(
        "Review", agents=3, input_path=str(repo), agent_cmd=edit, provider=quick_sim, store=store, api_key=KEY
    )
    graph: StateGraph[CodeState] = StateGraph(CodeState)
    graph.add_node("fleet", node)
    graph.add_edge(START, "fleet")
    graph.add_edge("fleet", END)
    out = graph.compile().invoke({})
    changes = out["fleet_changes"]
    assert changes["branch"] == f"fleet/{out['fleet_run_id']}" and len(changes["changes"]) == 3
    assert all(c["merged"] for c in changes["changes"])
    merged = subprocess.run(["git", "diff", "--name-only", "HEAD", changes["branch"]], cwd=repo, capture_output=True)
    assert merged.stdout.decode().split() == ["m0.py", "m1.py", "m2.py"]
