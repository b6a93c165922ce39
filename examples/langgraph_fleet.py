"""LangGraph + the fleet, offline: a graph whose parallel step is one fleet run.

    pip install 'agent-fleet-manager[langgraph]' && python examples/langgraph_fleet.py

plan (make the items) → fleet (one fleet run over them; a budget pause is an interrupt) → tally.
The graph is checkpointed in SQLite, so a crash mid-fleet resumes the same fleet run with
``graph.invoke(None, config)``. Everything runs against the bundled simulated provider.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agent_fleet.integrations.langgraph import fleet_node
from agent_fleet.sim.provider import SimConfig, sim_provider_process

KINDS = ["crashes on save", "could you add an export option", "why is the search slow", "shows the wrong total"]


class State(TypedDict, total=False):
    items: list[str]
    results: list[dict[str, Any]]
    fleet_run_id: str
    fleet_cost_usd: float
    tally: dict[str, int]


def plan(state: State) -> State:
    return {
        "items": [f"ticket {i}: the {['billing', 'profile', 'cart'][i % 3]} page {KINDS[i % 4]}" for i in range(60)]
    }


def tally(state: State) -> State:
    return {"tally": dict(Counter(r["category"] for r in state["results"]))}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="fleet-langgraph-"))
    os.chdir(work)  # the fleet's store and outputs go under ./.fleet
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        graph = StateGraph(State)
        graph.add_node("plan", plan)
        # a small token budget per session, so the run pauses and the graph is asked to raise it
        graph.add_node(
            "fleet",
            fleet_node(
                "Triage each ticket",
                agents=6,
                provider=url,
                api_key="sk-example",
                budget_tokens=1500,
                embedder="lexical",
            ),
        )
        graph.add_node("tally", tally)
        graph.add_edge(START, "plan")
        graph.add_edge("plan", "fleet")
        graph.add_edge("fleet", "tally")
        graph.add_edge("tally", END)
        config: Any = {"configurable": {"thread_id": "triage"}}
        with SqliteSaver.from_conn_string(str(work / "checkpoints.db")) as saver:
            app = graph.compile(checkpointer=saver)
            state = app.invoke({}, config)
            while "__interrupt__" in state:  # the fleet paused on budget: raise the per-session cap
                question = state["__interrupt__"][0].value
                print(f"run {question['fleet_run_id']} paused on budget; raising it")
                state = app.invoke(Command(resume={"tokens": 200_000}), config)
    print(f"fleet run {state['fleet_run_id']}: {len(state['results'])} results, ${state['fleet_cost_usd']:.4f}")
    print("tally:", state["tally"])


if __name__ == "__main__":
    main()
