"""CrewAI: :class:`FleetTool`, a tool that hands a crew's parallel step to the fleet (extra ``crewai``).

::

    from agent_fleet.integrations.crewai import FleetTool

    researcher = Agent(role="Researcher", goal="...", tools=[FleetTool(task="Summarise each page", agents=20)])

The agent calls it with ``items`` (a list of one-line strings: URLs, tickets, questions …) and,
optionally, its own ``task``; the fleet runs them as one run and the tool returns the aggregated
result as JSON — ``{run_id, status, cost_usd, results_unique, results: [{title, body, category,
location, confidence}]}``. A run that pauses on budget returns ``status: "paused"`` with what it
found so far (``agent-fleet budget raise RUN_ID`` and ``agent-fleet resume RUN_ID`` continue it).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from crewai.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agent_fleet.domain.ids import new_run_id
from agent_fleet.errors import UsageError
from agent_fleet.integrations.client import FleetClient, RunOutcome, check_items, fleet_client, items_run, run_sync

__all__ = ["FleetTool", "FleetToolInput"]

_KEPT = ("title", "body", "category", "location", "confidence")


class FleetToolInput(BaseModel):
    items: list[str] = Field(description="The items to work through in parallel, one line of text each.")
    task: str | None = Field(default=None, description="What to do with every item (else the tool's own task).")


class FleetTool(BaseTool):
    """Runs a list of items as one fleet run and returns the deduplicated results as JSON."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "Fleet run"
    description: str = (
        "Work through many items in parallel with a fleet of agents (one agent per batch of items) and get "
        "back the deduplicated results as JSON. Give `items`, a list of one-line strings, and optionally `task`."
    )
    args_schema: type[BaseModel] = FleetToolInput
    task: str | None = None  # the default task; the calling agent may give its own
    agents: int = 10
    max_results: int = 200  # results put in the answer (the run keeps all of them)
    store: str | None = None
    deploy_options: dict[str, Any] = Field(default_factory=dict)  # deploy's options by their Python names
    _client: FleetClient | None = PrivateAttr(default=None)

    def __init__(self, *, client: FleetClient | None = None, **data: Any) -> None:
        super().__init__(**data)
        self._client = client

    def _run(self, items: list[str], task: str | None = None) -> str:
        return run_sync(self._arun(items=items, task=task))

    async def _arun(self, items: list[str], task: str | None = None) -> str:
        what = task or self.task
        if not what:
            raise UsageError("FleetTool: give a task (to the tool, or in the call)")
        items = check_items(items, "FleetTool: items")
        client = self._client or fleet_client(store=self.store)
        run_id = new_run_id()
        agents = min(self.agents, len(items))
        options = await asyncio.to_thread(
            items_run, what, items, agents=agents, run_id=run_id, options=self.deploy_options
        )
        outcome = await client.deploy(options, run_id=run_id)
        return json.dumps(self._answer(outcome), ensure_ascii=False)

    def _answer(self, outcome: RunOutcome) -> dict[str, Any]:
        rows = [{k: r.get(k) for k in _KEPT if r.get(k) is not None} for r in outcome.results[: self.max_results]]
        return {
            "run_id": outcome.run_id,
            "status": outcome.status,
            "cost_usd": outcome.cost_usd,
            "results_unique": len(outcome.results),
            "results": rows,
        }
