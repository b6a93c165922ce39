"""A goal written as the task, with no input, turned into sub-tasks by one orchestrator model call.

Pure parts only: whether a task needs the planner (:func:`needs_planner`), the request's messages and
tool (:func:`planning_messages`, :data:`PLAN_TOOL`), the model's answer read back (:func:`read_plan`)
and the plan built from it (:func:`plan_from_subtasks`). The engine makes the call through the gateway
and records the answer with the plan, so a resumed run never plans twice.

The planner is asked for at most ``agents`` sub-tasks with exclusive scopes and at least a minimum of
work each; what it returns is bounded again here (extras are merged into the last sub-task, repeats
dropped), and an answer that is not a usable plan leaves one session working on the whole goal, with
the reason in the plan's notes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_fleet.decompose.decompose_options import DecomposeOptions
from agent_fleet.decompose.planner import plan_source
from agent_fleet.decompose.source import InputSource
from agent_fleet.decompose.task_items import items_in_task
from agent_fleet.domain.model import ToolSpec
from agent_fleet.domain.plan import InputKind, Plan

__all__ = ["PLAN_TOOL", "SubtaskPlan", "needs_planner", "plan_from_subtasks", "planning_messages", "read_plan"]

_GOAL_WORDS = 25  # a one-sentence task this long is a goal, not a question
_SEGMENT = re.compile(r"(?<=[.!?;])\s+|\n+")
_MAX_SUBTASK_CHARS = 600

PLAN_TOOL = ToolSpec(
    "submit_plan",
    "Submit the plan: the sub-tasks that together do the whole goal, each with its own exclusive scope.",
    {
        "type": "object",
        "properties": {
            "subtasks": {
                "type": "array",
                "items": {"type": "string", "description": "one sub-task: what to do, and its scope"},
            },
            "why": {"type": "string", "description": "why this many sub-tasks (one, for a simple request)"},
        },
        "required": ["subtasks", "why"],
    },
)

_SYSTEM = (
    "You are the planner of a fleet of agents. Split the user's goal into sub-tasks that agents can do in "
    "parallel, each with an exclusive scope (no two sub-tasks cover the same ground) and together covering the "
    "whole goal. Give at most {agents} sub-tasks and no sub-task smaller than a few minutes of an agent's work; "
    "a simple request is one sub-task. Call submit_plan once."
)


@dataclass(frozen=True, slots=True)
class SubtaskPlan:
    subtasks: tuple[str, ...]
    why: str


def is_goal(task: str) -> bool:
    """More than one sentence (or line), or one long sentence: work to plan, not a one-line question."""
    segments = [s for s in _SEGMENT.split(task.strip()) if s.strip()]
    return len(segments) >= 2 or len(task.split()) >= _GOAL_WORDS


def needs_planner(task: str, input_path: str | None, agents: int) -> bool:
    """No input, no items written in the task, room for more than one session, and a goal to split."""
    return input_path is None and agents > 1 and items_in_task(task) is None and is_goal(task)


def planning_messages(task: str, agents: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": _SYSTEM.format(agents=agents)},
        {"role": "user", "content": f"Goal:\n{task}"},
    ]


def read_plan(arguments: str | None, task: str, agents: int) -> SubtaskPlan:
    """The planner's ``submit_plan`` arguments, bounded by ``agents``; one sub-task (the whole goal)
    when they are not a usable plan."""
    try:
        data = json.loads(arguments or "")
    except ValueError:
        data = None
    raw = data.get("subtasks") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return SubtaskPlan((task,), "the planner's answer was not a plan: one session works on the whole goal")
    subtasks = _clean(raw)
    if not subtasks:
        return SubtaskPlan((task,), "the planner gave no sub-task: one session works on the whole goal")
    why = " ".join(str(data.get("why", "")).split())[:_MAX_SUBTASK_CHARS] if isinstance(data, dict) else ""
    if len(subtasks) > agents:  # bounded by --agents: the rest goes to the last session
        subtasks = [*subtasks[: agents - 1], "; ".join(subtasks[agents - 1 :])]
        why = f"{why} (more than {agents} sub-tasks proposed: the last session takes the rest)".strip()
    return SubtaskPlan(tuple(subtasks), why or f"{len(subtasks)} sub-task(s)")


def _clean(raw: Sequence[object]) -> list[str]:
    out: list[str] = []
    for entry in raw:
        text = entry.get("task") or entry.get("title") if isinstance(entry, dict) else entry
        line = " ".join(str(text or "").split())[:_MAX_SUBTASK_CHARS]
        if line and line not in out:
            out.append(line)
    return out


def plan_from_subtasks(task: str, planned: SubtaskPlan, *, budget_tokens: int) -> Plan:
    """One partition per sub-task (its one item); every session's task is the whole goal."""
    opts = DecomposeOptions()
    items = list(planned.subtasks)
    tokens = [max(1, math.ceil(len(i) / opts.chars_per_token)) for i in items]
    note = f"the planner split the goal into {len(items)} sub-task(s), each in exactly one partition: {planned.why}"
    source = InputSource(InputKind.LIST, None, items, tokens, notes=(note,))
    plan = plan_source(task, source, agents=len(items), budget_tokens=budget_tokens, options=opts)
    plan.check()
    return plan
