"""The orchestrator call that turns a goal written as the task into sub-tasks (``decompose.subtasks``).

One model call through the engine's gateway, under the session id ``RUN.planner``: metered, budgeted
and priced like any agent call. The run is recorded first (``run_created``, ``planning: true``), so the
call belongs to a run like any other: its answer goes into the run's ``plan`` event (``planner``: model,
usage, cost, sub-tasks, why) before any session starts, and a run killed at any point after planning is
resumed from that plan without a second planning call. A call that fails is recorded in the run's
stream as an agent's would be (``model_error`` with ``planner: true``, and ``model_resent`` for a
timed-out call charged at its reservation); its error says it was the planner's, and ``resume`` plans
the run again. The run's figures (folded from the log) count every one of these.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_fleet.decompose.subtasks import PLAN_TOOL, plan_from_subtasks, planning_messages, read_plan
from agent_fleet.domain.calls import CallShape
from agent_fleet.domain.error_kinds import error_kind
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest
from agent_fleet.domain.plan import Plan
from agent_fleet.errors import BudgetExhausted, ProviderError, UnreachableError
from agent_fleet.options import RunOptions, session_tokens
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.port import ModelGateway

__all__ = ["PLANNER_MAX_TOKENS", "plan_event_data", "plan_goal", "plan_recorded", "planner_session"]

PLANNER_MAX_TOKENS = 2048


def planner_session(run_id: str) -> str:
    return f"{run_id}.planner"


async def plan_goal(
    gateway: ModelGateway, run_id: str, options: RunOptions, shape: CallShape | None = None
) -> tuple[Plan, dict[str, Any]]:
    """The plan of the goal, and the record of the call that made it (for the ``plan`` event).
    ``shape``: what the run sends on its model's calls (``call_shape``), the output limit included."""
    shape = shape or CallShape()
    request = ChatRequest(
        model=options.model,
        messages=planning_messages(options.task, options.agents),
        tools=(PLAN_TOOL,),
        max_tokens=shape.max_tokens or PLANNER_MAX_TOKENS,
        temperature=shape.temperature,
        seed=shape.seed,
        tool_choice=shape.tool_choice,
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


async def plan_recorded(
    gateway: ModelGateway, log: SessionLog, run_id: str, options: RunOptions, shape: CallShape | None = None
) -> tuple[Plan, dict[str, Any]]:
    """:func:`plan_goal` for a recorded run: a failed call is recorded in the run's stream and raised
    with a message that names the planner and the run to resume (its type, and so its exit code, kept)."""
    try:
        return await plan_goal(gateway, run_id, options, shape)
    except (ProviderError, UnreachableError, BudgetExhausted) as exc:
        events: list[tuple[str, dict[str, Any]]] = []
        charged = getattr(exc, "charged", None)
        if charged is not None:  # a timed-out call may have been billed: charged at its reservation
            usage, cost = charged
            resent = {"planner": True, "cause": str(error_kind(exc)), "usage": usage.to_dict()}
            events.append((EventType.MODEL_RESENT, {**resent, "tokens": usage.total_tokens, "cost_usd": str(cost)}))
        failed = {"planner": True, "error": str(exc), "kind": str(error_kind(exc)), "model": options.model}
        failed.update(status=getattr(exc, "status", 0), retried=[str(k) for k in getattr(exc, "retried", ())])
        events.append((EventType.MODEL_ERROR, failed))
        await log.emit_events(run_id, events)
        exc.args = (f"the planner's call of run {run_id} failed ({exc}); `agent-fleet resume {run_id}` plans it again",)
        raise


def plan_event_data(plan: Plan, planner: dict[str, Any] | None) -> dict[str, Any]:
    """The ``plan`` event: the plan, and the call that made it when a planner did."""
    data: dict[str, Any] = {"plan": plan.to_dict()}
    if planner is not None:
        data["planner"] = planner
    return data
