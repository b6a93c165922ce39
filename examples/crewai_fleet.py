"""CrewAI + the fleet, offline: ``FleetTool`` hands a crew's parallel step to the fleet.

    pip install 'agent-fleet-manager[crewai]' && python examples/crewai_fleet.py

The tool is what a crew agent calls (``Agent(tools=[FleetTool(...)])``); here it is called the way
CrewAI calls it, and its JSON answer — the fleet run's aggregated results — printed. The fleet runs
against the bundled simulated provider.
"""

from __future__ import annotations

import json
import os
import tempfile

from crewai import Agent

from agent_fleet.integrations.crewai import FleetTool
from agent_fleet.sim.provider import SimConfig, sim_provider_process

PAGES = [f"https://docs.example.org/guide/{topic}" for topic in ("install", "configure", "deploy", "upgrade")]


def main() -> None:
    os.chdir(tempfile.mkdtemp(prefix="fleet-crewai-"))
    os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        os.environ.update(FLEET_BASE_URL=url, FLEET_API_KEY="sk-example")
        tool = FleetTool(task="Summarise each page", agents=4, deploy_options={"embedder": "lexical"})
        researcher = Agent(role="Researcher", goal="Summarise the docs", backstory="Technical writer.", tools=[tool])
        print("agent tools:", [t.name for t in researcher.tools or []])
        answer = json.loads(tool.run(items=PAGES))
    print(f"run {answer['run_id']} {answer['status']}: {answer['results_unique']} results, ${answer['cost_usd']:.4f}")
    for row in answer["results"]:
        print(" -", row["title"])


if __name__ == "__main__":
    main()
