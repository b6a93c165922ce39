"""LangGraph: the fleet as the worker pool of a graph's parallel step (extra ``langgraph``).

::

    from agent_fleet.integrations.langgraph import fleet_node

    graph.add_node("fleet", fleet_node("Summarise each page", items_key="urls", store="sqlite:///fleet.db"))

:func:`fleet_node` runs ``state[items_key]`` (a list of one-line strings) as one fleet run and returns
``{results_key: [rows of results.jsonl], "fleet_run_id": ..., "fleet_cost_usd": ..., "fleet_changes":
...}``. With the run id already in the state it continues that run instead of starting another. Given
``input_path`` (a directory: a codebase), it runs over that directory instead of a list, and
``fleet_changes`` holds the code changes its sessions made (``agent-fleet changes --json``: each
change's branch, files, size, and whether it was merged into ``fleet/RUN_ID``).

Durable across crashes of the graph process. The run id is chosen inside a LangGraph task
(``@task``): LangGraph saves a task's result with the checkpointer as soon as it returns, before the
fleet starts, and hands the saved result back when the node runs again. A graph killed mid-fleet and
restarted from its checkpointer (``graph.invoke(None, config)``) therefore resumes *the same* fleet
run, which continues from its session log: nothing that finished is dispatched again.

Budget pauses are interrupts. A run whose sessions paused on budget makes the node call
``interrupt({"fleet_run_id", "reason": "budget", ...})``; the graph answers with
``Command(resume={"tokens": N})`` or ``{"usd": "X"}`` (new caps, as ``agent-fleet budget raise``),
after which the run continues, or with ``{"stop": True}`` to take the results so far. Every answer is
recorded in the run's log with the node's task id, so a node re-run after a crash applies none twice.

:func:`fleet_sends` builds the ``Send`` packets of a fan-out whose branches are fleet runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableLambda
from langgraph.config import get_config
from langgraph.func import task as graph_task
from langgraph.types import Send, interrupt

from agent_fleet.domain.events import EventType
from agent_fleet.domain.ids import new_run_id
from agent_fleet.engine import RunOptions
from agent_fleet.errors import UsageError
from agent_fleet.integrations.client import (
    STOPPED,
    FleetClient,
    RunOutcome,
    check_items,
    fleet_client,
    items_run,
    run_sync,
)

__all__ = ["FleetNode", "fleet_node", "fleet_sends"]

_OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(RunOptions)) - {"task", "agents"}
_CLIENT_NAMES = frozenset({"store", "server", "api_key"})
_ENDS = frozenset({EventType.RUN_PAUSED, EventType.RUN_COMPLETED, EventType.RUN_FAILED})


@graph_task
def _choose_run_id() -> str:
    """A new run id, saved by the checkpointer the moment it is chosen (see the module docstring)."""
    return new_run_id()


def fleet_node(
    task: str,
    *,
    items_key: str = "items",
    results_key: str = "results",
    agents: int = 10,
    run_id_key: str = "fleet_run_id",
    cost_key: str = "fleet_cost_usd",
    changes_key: str = "fleet_changes",
    runs_key: str | None = None,
    client: FleetClient | None = None,
    name: str = "fleet",
    **deploy_options: Any,
) -> RunnableLambda[Any, dict[str, Any]]:
    """A node for ``StateGraph.add_node`` that runs ``state[items_key]`` as one fleet run.

    ``deploy_options`` are ``deploy``'s options by their Python names (``provider``, ``store``,
    ``server``, ``budget_tokens``, ``model``, ``config_path`` …). ``run_id_key`` / ``cost_key`` name the
    state keys the run id and its cost go to (two fleet nodes in one graph need their own), ``changes_key``
    the run's code changes. With ``input_path`` (a directory) the node runs over that codebase and
    ``state[items_key]`` is not read. In a
    ``Send`` fan-out, where branches write at once, give ``runs_key`` (a list key with a reducer such
    as ``operator.add``): each branch then writes ``{runs_key: [{run_id, status, cost_usd, items}]}``
    instead of the two single-value keys.
    """
    unknown = sorted(set(deploy_options) - _OPTION_NAMES - _CLIENT_NAMES)
    if unknown:
        raise UsageError(f"fleet_node: unknown deploy option(s) {', '.join(unknown)}")
    options = {k: v for k, v in deploy_options.items() if k in _OPTION_NAMES}
    RunOptions(task=task, agents=agents, **options)  # bad values fail here, when the graph is built
    if client is None:
        client = fleet_client(**{k: v for k, v in deploy_options.items() if k in _CLIENT_NAMES})
    node = FleetNode(
        client=client,
        task=task,
        agents=agents,
        options=options,
        items_key=items_key,
        results_key=results_key,
        run_id_key=run_id_key,
        cost_key=cost_key,
        changes_key=changes_key,
        runs_key=runs_key,
    )
    return RunnableLambda(node.invoke, afunc=node.ainvoke, name=name)


def fleet_sends(
    node: str,
    items: Sequence[str],
    *,
    items_key: str = "items",
    per_run: int | None = None,
    state: Mapping[str, Any] | None = None,
) -> list[Send]:
    """``Send`` packets handing ``items`` to the fleet node ``node``: one fleet run for all of them, or
    one per ``per_run`` items (runs go in parallel). ``state`` adds keys to every packet.

    For ``add_conditional_edges(source, lambda s: fleet_sends("fleet", s["urls"]), ["fleet"])``, where
    a plain map step would send one packet per item to a per-item worker node.
    """
    if per_run is not None and per_run < 1:
        raise UsageError(f"fleet_sends: per_run must be at least 1, not {per_run}")
    size = per_run or max(1, len(items))
    extra = dict(state or {})
    return [Send(node, {**extra, items_key: list(items[i : i + size])}) for i in range(0, len(items), size)]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FleetNode:
    """The node's behaviour; :func:`fleet_node` wraps it for LangGraph (sync and async)."""

    client: FleetClient
    task: str
    agents: int
    options: Mapping[str, Any]
    items_key: str
    results_key: str
    run_id_key: str
    cost_key: str
    changes_key: str
    runs_key: str | None

    def invoke(self, state: Mapping[str, Any]) -> dict[str, Any]:
        items = self._items(state)
        run_id = state.get(self.run_id_key) or _choose_run_id().result()
        outcome = run_sync(self.advance(run_id, items))
        answered = 0
        while outcome.paused:
            answer = interrupt(_question(outcome))
            if _stops(answer):
                break
            outcome = run_sync(self.answer(run_id, items, answered, answer, _task_tag()))
            answered += 1
        return self._update(outcome, len(items))

    async def ainvoke(self, state: Mapping[str, Any]) -> dict[str, Any]:
        items = self._items(state)
        run_id = state.get(self.run_id_key) or await _choose_run_id()
        outcome = await self.advance(run_id, items)
        answered = 0
        while outcome.paused:
            answer = interrupt(_question(outcome))
            if _stops(answer):
                break
            outcome = await self.answer(run_id, items, answered, answer, _task_tag())
            answered += 1
        return self._update(outcome, len(items))

    async def advance(self, run_id: str, items: Sequence[str]) -> RunOutcome:
        """Start the run, or continue it unless it stopped (ended, or paused awaiting an answer)."""
        state = await self.client.state(run_id)
        if state is None:
            return await self.client.deploy(await asyncio.to_thread(self._options, run_id, items), run_id=run_id)
        if state in STOPPED:
            return await self.client.outcome(run_id)
        return await self.client.resume(run_id)  # created, running or interrupted: its driver died

    async def answer(self, run_id: str, items: Sequence[str], index: int, answer: Any, tag: str) -> RunOutcome:
        """Apply the ``index``-th answer of this node's task once, then continue the run."""
        events = await self.client.events(run_id)
        raises = [e for e in events if e["type"] == EventType.BUDGET_RAISED and _tag_of(e) == tag]
        if len(raises) <= index:
            tokens, usd = _caps(answer)
            note = {"langgraph": {"task": tag, "answer": index}}
            await self.client.raise_budget(run_id, tokens=tokens, usd=usd, note=note)
            return await self.client.resume(run_id)
        seq = raises[index]["seq"]
        if any(e["type"] in _ENDS and e["seq"] > seq for e in events):
            return await self.client.outcome(run_id)  # resumed after this raise already, and stopped again
        return await self.advance(run_id, items)

    def _items(self, state: Mapping[str, Any]) -> list[str]:
        if self.options.get("input_path"):  # a codebase: the directory is the input
            return []
        return check_items(state.get(self.items_key), f"fleet_node: state[{self.items_key!r}]")

    def _options(self, run_id: str, items: Sequence[str]) -> RunOptions:
        if self.options.get("input_path"):
            return RunOptions(task=self.task, agents=self.agents, **self.options)
        listed = {k: v for k, v in self.options.items() if k != "input_path"}
        return items_run(self.task, items, agents=self.agents, run_id=run_id, options=listed)

    def _update(self, outcome: RunOutcome, items: int) -> dict[str, Any]:
        if self.runs_key is not None:
            run = {
                "run_id": outcome.run_id,
                "status": outcome.status,
                "cost_usd": outcome.cost_usd,
                "items": items,
                "changes": outcome.changes,
            }
            return {self.results_key: outcome.results, self.runs_key: [run]}
        return {
            self.results_key: outcome.results,
            self.run_id_key: outcome.run_id,
            self.cost_key: outcome.cost_usd,
            self.changes_key: outcome.changes,
        }


def _question(outcome: RunOutcome) -> dict[str, Any]:
    """The interrupt's value: which run paused, how far it got, how to answer."""
    s = outcome.summary
    return {
        "fleet_run_id": outcome.run_id,
        "reason": "budget",
        "status": outcome.status,
        "sessions": s.get("sessions"),
        "tokens": s.get("tokens"),
        "cost_usd": s.get("cost_usd"),
        "results_so_far": len(outcome.results),
        "answer_with": "Command(resume={'tokens': N}) or {'usd': 'X'} (new caps), or {'stop': True}",
    }


def _stops(answer: Any) -> bool:
    return isinstance(answer, Mapping) and bool(answer.get("stop"))


def _caps(answer: Any) -> tuple[int | None, str | None]:
    if not isinstance(answer, Mapping) or not ({"tokens", "usd"} & set(answer)):
        raise UsageError(f"fleet_node: answer a budget pause with {{'tokens': N}} or {{'usd': 'X'}}, not {answer!r}")
    tokens, usd = answer.get("tokens"), answer.get("usd")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
        raise UsageError(f"fleet_node: 'tokens' must be a whole number, not {tokens!r}")
    return tokens, None if usd is None else str(usd)


def _tag_of(event: Mapping[str, Any]) -> str | None:
    mark = event["data"].get("langgraph")
    return mark.get("task") if isinstance(mark, Mapping) else None


def _task_tag() -> str:
    """The running node's task, as LangGraph names it (the same when a crashed node runs again)."""
    return str(get_config().get("configurable", {}).get("checkpoint_ns", ""))
