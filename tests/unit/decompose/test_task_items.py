"""Items written in the task (URLs, numbered and bulleted lists, paths) are split without a model call."""

from __future__ import annotations

import pytest

from agent_fleet.brain.protocol import first_user_message
from agent_fleet.decompose import decompose
from agent_fleet.decompose.planner import URL_TOOLS
from agent_fleet.decompose.task_items import items_in_task
from agent_fleet.domain.plan import InputKind

URLS = [f"https://example.org/page/{i}" for i in range(1, 13)]
TASK = "Summarise these pages: " + " … ".join(URLS)


def test_urls_in_the_task_are_the_items_and_the_instruction_loses_them() -> None:
    found = items_in_task(TASK)
    assert found is not None
    assert found.items == tuple(URLS)
    assert found.instruction == "Summarise these pages:"
    assert found.what == "URLs"
    dup = items_in_task("Compare https://a.org/x, https://b.org/y and https://a.org/x.")
    assert dup is not None and dup.items == ("https://a.org/x", "https://b.org/y")  # each once, trailing dot cut


def test_numbered_bulleted_and_path_items() -> None:
    numbered = items_in_task("Review these:\n1. the login flow\n2) the payment retry\n3. the export job")
    assert numbered is not None and numbered.items == ("the login flow", "the payment retry", "the export job")
    assert numbered.instruction == "Review these:"
    bullets = items_in_task("Translate into German:\n- the welcome screen\n- the error page")
    assert bullets is not None and bullets.what == "list items" and len(bullets.items) == 2
    paths = items_in_task("Review src/app/main.py and src/app/db.py for bugs")
    assert paths is not None and paths.items == ("src/app/main.py", "src/app/db.py")
    assert paths.instruction == "Review for bugs"


@pytest.mark.parametrize(
    "task", ["What is the capital of France?", "Research these 1000 URLs", "Summarise https://only.one/page"]
)
def test_a_task_without_two_items_has_none(task: str) -> None:
    assert items_in_task(task) is None


@pytest.mark.parametrize(("agents", "sessions"), [(100, 12), (12, 12), (5, 5), (1, 1)])
def test_twelve_urls_in_the_task_run_in_min_agents_sessions_each_url_once(agents: int, sessions: int) -> None:
    plan = decompose(TASK, None, agents=agents)
    assert len(plan.partitions) == sessions
    assert plan.kind is InputKind.LIST
    assert plan.total_items == 12
    seen = [u for p in plan.partitions for u in p.items]
    assert sorted(seen) == sorted(URLS) and len(seen) == len(set(seen))
    assert plan.task == "Summarise these pages:"
    assert all(p.tools == URL_TOOLS for p in plan.partitions)
    assert any("12 URLs written in the task" in n for n in plan.notes)
    # a session's first message names its own URLs only
    first = plan.partitions[0]
    msg = first_user_message(plan.task, first)
    assert all((u in msg) == (u in first.items) for u in URLS)


def test_a_one_line_question_runs_one_session_and_says_why() -> None:
    plan = decompose("What is the capital of France?", None, agents=50)
    assert len(plan.partitions) == 1
    assert plan.task == "What is the capital of France?"
    assert any("one session works on the task" in n for n in plan.notes)
