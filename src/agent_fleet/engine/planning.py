"""The orchestrator call that turns a goal written as the task into sub-tasks (``decompose.subtasks``).

One model call through the engine's gateway, under the session id ``RUN.planner``: metered, budgeted
and priced like any agent call. Its answer goes into the run's ``plan`` event (``planner``: model,
usage, cost, sub-tasks, why), written with ``run_created`` in one append before any session starts, so
a run killed at any point after planning is resumed from that plan without a second planning call,
and the run's figures (folded from the log) count the call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_fleet.decompose.subtasks import PLAN_TOOL, plan_from_subtasks, planning_messages, read_plan
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.plan import Plan
from agent_fleet.options import RunOptions, session_tokens
from agent_fleet.spend.port import ModelGateway

__all__ = ["PLANNER_MAX_TOKENS", "plan_event_data", "plan_goal", "planner_session"]

PLANNER_MAX_TOKENS = 2048


def planner_session(run_id: str) -> str:
    return f"{run_id}.planner"


async def plan_goal(gateway: ModelGateway, run_id: str, options: RunOptions) -> tuple[Plan, dict[str, Any]]:
    """The plan of the goal, and the record of the call that made it (for the ``plan`` event)."""
    request = ChatRequest(
        model=options.model,
        messages=planning_messages(options.task, options.agents),
        tools=(PLAN_TOOL,),
        max_tokens=PLANNER_MAX_TOKENS,
    )
    response = await gateway.complete(planner_session(run_id), request)
    call = next((c for c in response.tool_calls if c.name == PLAN_TOOL.name), None)
    planned = read_plan(call.arguments if call is not None else None, options.task, options.agents)
    budget = session_tokens(options)
    plan = await asyncio.to_thread(plan_from_subtasks, options.task, planned, budget_tokens=budget)
    record = {
        "model": response.model or options.model,
        "usage": response.usage.to_dict(),
        "cost_usd": str(response.cost_usd),
        "calls": 1,
        "retried": list(response.retried),
        "subtasks": list(planned.subtasks),
        "why": planned.why,
    }
    return plan, record


def plan_event_data(plan: Plan, planner: dict[str, Any] | None) -> dict[str, Any]:
    """The ``plan`` event: the plan, and the call that made it when a planner did."""
    data: dict[str, Any] = {"plan": plan.to_dict()}
    if planner is not None:
        data["planner"] = planner
    return data
