"""``agent-fleet gateway`` as a real process in front of the simulated provider."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import httpx
import openai

from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.testing.processes import stop_async

KEY = "sk-cli-gateway-SECRET-41c2"


async def test_gateway_command_serves_sessions_and_keeps_the_key() -> None:
    async with SimProvider(SimConfig()) as sim:
        env = {**os.environ, "FLEET_API_KEY": KEY}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent_fleet.cli",
            "gateway",
            "--port",
            "0",
            "--provider",
            sim.base_url,
            "--model",
            "gpt-4.1-mini",
            "--budget-tokens",
            "20",
            "--session",
            "s-1",
            "--json",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            info = json.loads(line)
            client = openai.AsyncOpenAI(
                base_url=info["openai_base_url"], api_key=info["sessions"]["s-1"], max_retries=0
            )
            try:
                r = await client.chat.completions.create(
                    model="x", messages=[{"role": "user", "content": "Task: hi"}], max_tokens=100
                )
                assert r.usage is not None and r.usage.total_tokens > 20  # admitted: the cap was not reached
                try:
                    await client.chat.completions.create(
                        model="x", messages=[{"role": "user", "content": "Task: hi"}], max_tokens=100
                    )
                    raise AssertionError("the budget should have refused this call")
                except openai.APIStatusError as exc:
                    assert exc.status_code == 402
            finally:
                await client.close()
            async with httpx.AsyncClient() as http:
                headers = {"Authorization": f"Bearer {info['admin_token']}"}
                stats = (await http.get(info["anthropic_base_url"] + "/fleet/stats", headers=headers)).json()
            assert stats["run"]["llm_calls"] == 1 and stats["open_reservations"] == 0
        finally:
            out, err = await stop_async(proc, sig=signal.SIGINT, timeout=30, group=True)
    assert proc.returncode == 130
    assert KEY not in line.decode() + out.decode() + err.decode()
