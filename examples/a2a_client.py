"""An A2A client hands a task to the fleet, offline: ``agent-fleet serve`` with the official a2a-sdk.

    pip install 'agent-fleet-manager[a2a]' && python examples/a2a_client.py

Starts ``serve`` (one team's token) against the bundled simulated provider, fetches its agent card
from ``/.well-known/agent-card.json``, sends one message — the task as text, the items and options as a
data part — and prints the task's states as they stream in, then the run's figures from its artifact.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, new_data_part
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

from agent_fleet.sim.provider import SimConfig, sim_provider_process

TOKEN = "team-token-" + "4c1d" * 6


async def drive(url: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        print("agent:", card.name, "skills:", [s.id for s in card.skills])
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        items = [f"request {i}: please add an option for the {i}th report" for i in range(12)]
        message = Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            parts=[Part(text="Classify each request"), new_data_part({"items": items, "agents": 3})],
        )
        task = None
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.HasField("status_update"):
                print("state:", TaskState.Name(event.status_update.status.state))
            if event.HasField("task"):
                task = event.task
                print("state:", TaskState.Name(task.status.state))
        assert task is not None
        done = await client.get_task(GetTaskRequest(id=task.id))
        run = next(get_data_parts(a.parts)[0] for a in done.artifacts if a.name == "run")
        summary = run["summary"]
        print(f"run {run['run_id']} {run['status']}: {int(summary['results_unique'])} results, ${summary['cost_usd']}")
        await client.close()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="fleet-a2a-"))
    (work / "fleet.yaml").write_text("teams:\n  docs: {token_env: DOCS_TOKEN}\n")
    with sim_provider_process(SimConfig(latency=0.01)) as provider:
        env = {**os.environ, "FLEET_BASE_URL": provider, "FLEET_API_KEY": "sk-example", "DOCS_TOKEN": TOKEN}
        cmd = [sys.executable, "-m", "agent_fleet.cli", "serve", "--port", "0", "--config", "fleet.yaml"]
        with subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, text=True) as server:
            try:
                assert server.stdout is not None
                asyncio.run(drive(server.stdout.readline().strip()))
            finally:
                server.terminate()


if __name__ == "__main__":
    main()
