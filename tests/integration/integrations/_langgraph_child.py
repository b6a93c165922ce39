"""A graph process for the LangGraph kill -9 tests: one fleet node over N items, checkpointed.

    python _langgraph_child.py CHECKPOINTER THREAD start ITEMS   # a new graph run over ITEMS items
    python _langgraph_child.py CHECKPOINTER THREAD resume        # continue the thread from its checkpoint

CHECKPOINTER is ``sqlite:PATH`` or a PostgreSQL conninfo URL. The fleet's provider and store come from
the environment (``FLEET_BASE_URL``, ``FLEET_API_KEY``, ``FLEET_STORE``). Prints the final state as one
JSON line.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from agent_fleet.integrations.langgraph import fleet_node


class State(TypedDict, total=False):
    items: list[str]
    results: list[dict[str, Any]]
    fleet_run_id: str
    fleet_cost_usd: float


@contextmanager
def checkpointer(spec: str) -> Iterator[BaseCheckpointSaver[Any]]:
    if spec.startswith("sqlite:"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(spec.removeprefix("sqlite:")) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(spec) as pg:
        pg.setup()
        yield pg


WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]


def lines(n: int) -> list[str]:
    """``n`` distinct one-line items (distinct enough that deduplication keeps each)."""
    rng = random.Random(n)
    return [f"item {i}: " + " ".join(rng.sample(WORDS, 6)) for i in range(n)]


def main() -> None:
    spec, thread, mode = sys.argv[1:4]
    graph = StateGraph(State)
    graph.add_node("fleet", fleet_node("Classify each line", agents=10, embedder="lexical"))
    graph.add_edge(START, "fleet")
    graph.add_edge("fleet", END)
    config: Any = {"configurable": {"thread_id": thread}}
    with checkpointer(spec) as saver:
        app = graph.compile(checkpointer=saver)
        if mode == "start":
            items = lines(int(sys.argv[4]))
            final = app.invoke({"items": items}, config)
        else:
            final = app.invoke(None, config)
    print(json.dumps({k: final.get(k) for k in ("fleet_run_id", "fleet_cost_usd", "results")}), flush=True)


if __name__ == "__main__":
    main()
