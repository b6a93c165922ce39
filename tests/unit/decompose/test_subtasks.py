"""The planner's pure parts: when a task is planned, and how its answer becomes a plan."""

from __future__ import annotations

import json

from agent_fleet.decompose.subtasks import is_goal, needs_planner, plan_from_subtasks, planning_messages, read_plan

GOAL = "Write a guide to bikes. Cover commuter bikes. Cover cargo bikes."


def test_a_goal_without_input_or_items_is_planned_and_a_question_is_not() -> None:
    assert is_goal(GOAL) and needs_planner(GOAL, None, 5)
    assert not is_goal("What is the capital of France?")
    assert not needs_planner("What is the capital of France?", None, 5)
    assert not needs_planner(GOAL, "input.txt", 5)  # the input is the work
    assert not needs_planner(GOAL, None, 1)  # one agent: nothing to split
    assert not needs_planner("Summarise https://a.example/x and https://b.example/y. Then compare.", None, 5)
    assert is_goal(" ".join(["word"] * 25))  # one long sentence is a goal too


def test_the_request_asks_for_at_most_agents_sub_tasks() -> None:
    system, user = planning_messages(GOAL, 4)
    assert "at most 4 sub-tasks" in system["content"] and user["content"].endswith(GOAL)


def test_the_answer_is_bounded_cleaned_and_falls_back_to_one_session() -> None:
    answer = json.dumps({"subtasks": ["a  one", "b", {"task": "c"}, "b", "", "d", "e"], "why": "parts"})
    plan = read_plan(answer, GOAL, 3)
    assert plan.subtasks == ("a one", "b", "c; d; e")  # repeats and blanks dropped; the rest to the last
    assert plan.why.startswith("parts") and "more than 3" in plan.why
    assert read_plan(json.dumps({"subtasks": ["x", "y"], "why": ""}), GOAL, 5).subtasks == ("x", "y")
    for bad in (None, "not json", json.dumps({"plan": []}), json.dumps({"subtasks": []}), json.dumps([1])):
        fallback = read_plan(bad, GOAL, 5)
        assert fallback.subtasks == (GOAL,) and "one session" in fallback.why


def test_each_sub_task_is_one_partition_and_every_session_sees_the_goal() -> None:
    plan = plan_from_subtasks(GOAL, read_plan(json.dumps({"subtasks": ["x", "y", "z"], "why": "w"}), GOAL, 5),
                              budget_tokens=1000)  # fmt: skip
    assert [p.items for p in plan.partitions] == [("x",), ("y",), ("z",)]
    assert plan.task == GOAL and plan.total_items == 3
    assert any("planner split the goal into 3" in n for n in plan.notes)
