"""CrewAI's real package: ``FleetTool`` as a crew's tool.

A real ``Crew`` with one ``Agent`` whose model is scripted (the stand-in for a paid model: it asks for
the tool in CrewAI's ReAct format, then answers): CrewAI runs the tool, the fleet runs the tickets as
one run against the simulated provider, and the model's next prompt holds the fleet's aggregated
result. The tool also runs on its own (``run``, ``arun``), and bad input is one clear error.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("FLEET_REQUIRE_INTEGRATIONS") != "1":  # CI installs the crewai extra and sets it
    pytest.importorskip("crewai")

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool
from pydantic import Field

from agent_fleet.domain.events import EventType
from agent_fleet.errors import UsageError
from agent_fleet.integrations.crewai import FleetTool
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, sim_provider_process

TICKETS = ["ticket 1: login fails with an error", "ticket 2: please add dark mode", "ticket 3: why is export slow?"]


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        yield url


@pytest.fixture
def fleet_env(sim_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEET_BASE_URL", sim_url)
    monkeypatch.setenv("FLEET_API_KEY", "sk-crewai-test")
    monkeypatch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "false")
    return f"sqlite:///{tmp_path / 'fleet.db'}"


class ScriptedModel(BaseLLM):
    """Asks for the fleet tool once, then answers with whether the fleet's result reached it."""

    prompts: list[Any] = Field(default_factory=list)

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.prompts.append(messages)
        if len(self.prompts) == 1:
            return (
                "Thought: these tickets are a parallel step for the fleet.\nAction: Fleet run\n"
                f"Action Input: {json.dumps({'items': TICKETS})}"
            )
        return "Thought: I now know the final answer\nFinal Answer: triaged"

    def supports_function_calling(self) -> bool:
        return False


def test_a_crew_hands_its_parallel_step_to_the_fleet(fleet_env: str) -> None:
    tool = FleetTool(task="Classify each ticket", agents=2, store=fleet_env, deploy_options={"embedder": "lexical"})
    assert isinstance(tool, BaseTool)
    model = ScriptedModel(model="scripted")
    agent = Agent(role="Triage", goal="Classify tickets", backstory="Support lead.", tools=[tool], llm=model)
    task = Task(description="Classify these tickets.", expected_output="a triage", agent=agent)
    out = Crew(agents=[agent], tasks=[task]).kickoff()
    assert out.raw == "triaged" and len(model.prompts) == 2
    said = [m["content"] for m in model.prompts[1] if m["role"] == "assistant"][-1]
    observed = json.loads(said.split("Observation: ", 1)[1])  # the tool's answer, as CrewAI gave it back
    assert observed["status"] == "completed" and observed["results_unique"] == 3
    assert sorted(r["category"] for r in observed["results"]) == ["bug-report", "feature-request", "question"]
    run_id = observed["run_id"]

    async def recorded() -> int:
        async with open_store(fleet_env) as log:
            return len(await log.events_of_run(run_id, [EventType.RESULT_ITEM]))

    assert asyncio.run(recorded()) == 3  # the fleet's own log holds what the crew was told


def test_the_tool_runs_on_its_own_sync_and_async(fleet_env: str) -> None:
    tool = FleetTool(agents=3, store=fleet_env, deploy_options={"embedder": "lexical"})
    answer = json.loads(tool.run(items=TICKETS[:2], task="Classify"))
    assert answer["status"] == "completed" and answer["results_unique"] == 2
    assert {"title", "body", "category"} <= set(answer["results"][0])

    again = json.loads(asyncio.run(tool.arun(items=TICKETS, task="Classify")))
    assert again["results_unique"] == 3 and again["run_id"] != answer["run_id"]
    assert os.path.exists(Path(".fleet") / "runs" / again["run_id"] / "items.txt")


def test_bad_input_is_one_clear_error(fleet_env: str) -> None:
    tool = FleetTool(store=fleet_env)
    with pytest.raises(UsageError, match="give a task"):
        tool.run(items=TICKETS)
    with pytest.raises(UsageError, match="non-blank line"):
        tool.run(items=["two\nlines"], task="t")
