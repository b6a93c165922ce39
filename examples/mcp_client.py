"""An MCP client drives the fleet, offline: ``agent-fleet mcp`` over stdio with the official SDK.

    pip install 'agent-fleet-manager[mcp]' && python examples/mcp_client.py

Lists the server's tools, deploys a run without waiting, polls ``status`` until it ends, pages through
``results`` and reads the report resource. The server's provider is the bundled simulated one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from agent_fleet.sim.provider import SimConfig, sim_provider_process


async def call(session: ClientSession, tool: str, **args: Any) -> Any:
    result = await session.call_tool(tool, args)
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def drive(params: StdioServerParameters, items: Path) -> None:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        print("tools:", sorted(t.name for t in (await session.list_tools()).tools))
        run = await call(session, "deploy", task="Classify each request", input=str(items), agents=3)
        while (status := await call(session, "status", run_id=run["run_id"]))["status"] == "running":
            await asyncio.sleep(0.2)
        print(f"run {run['run_id']} {status['status']}: {status['results_unique']} results, ${status['cost_usd']:.4f}")
        page = await call(session, "results", run_id=run["run_id"], limit=5)
        for row in page["results"]:
            print(" -", row["title"])
        report = await session.read_resource(f"fleet://runs/{run['run_id']}/report.md")  # type: ignore[arg-type]
        print("report:", report.contents[0].text.splitlines()[0])  # type: ignore[union-attr]


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="fleet-mcp-"))
    items = work / "requests.txt"
    items.write_text("".join(f"request {i}: please add an option for the {i}th report\n" for i in range(15)))
    with sim_provider_process(SimConfig(latency=0.01)) as url:
        env = {**os.environ, "FLEET_BASE_URL": url, "FLEET_API_KEY": "sk-example"}
        args = ["-m", "agent_fleet.cli", "mcp", "--embedder", "lexical"]
        asyncio.run(drive(StdioServerParameters(command=sys.executable, args=args, env=env, cwd=work), items))


if __name__ == "__main__":
    main()
