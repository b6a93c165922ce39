"""What the user sets is what goes on the wire: fleet.yaml ``models[]`` (``max_tokens``, ``temperature``,
``seed``, ``tool_choice``) and ``deploy``'s ``--max-tokens`` / ``--temperature`` / ``--seed`` reach every
call of a run — the planner's, the agents', the verifier's — as the simulated provider receives them
over HTTP; flags win over the file, and ``tool_choice`` is ``auto`` whenever tools are offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_fleet.engine import RunOptions, deploy
from agent_fleet.sim.http_server import SimProvider
from agent_fleet.sim.settings import SimConfig

GOAL = (
    "Write a buyer's guide to electric bikes. Cover commuter bikes for city streets. "
    "Cover cargo bikes for families. Cover folding bikes for trains."
)


def _config(path: Path, base_url: str, **entry: Any) -> str:
    model = {"name": "local", "provider": base_url, "model": "sim-small", **entry}
    data = {"models": [model], "verification": {"fraction": 1.0, "minimum": 1}}
    cfg = path / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(data))
    return str(cfg)


def _roles(bodies: list[dict[str, Any]]) -> dict[str, int]:
    """How many calls each part of the run made: the planner offers submit_plan, the verifier
    submit_verdict, the agents submit_result."""
    out: dict[str, int] = {}
    for body in bodies:
        names = {t["function"]["name"] for t in body.get("tools") or ()}
        role = "planner" if "submit_plan" in names else "verifier" if "submit_verdict" in names else "agent"
        out[role] = out.get(role, 0) + 1
    return out


@pytest.mark.parametrize(
    ("entry", "flags", "wire"),
    [
        # fleet.yaml alone
        ({"max_tokens": 512, "temperature": 0, "seed": 42}, {}, {"max_tokens": 512, "temperature": 0, "seed": 42}),
        # the flags win over the file; what the flags leave unset still comes from it
        (
            {"max_tokens": 512, "temperature": 0.7, "seed": 42},
            {"max_tokens": 300, "seed": 7},
            {"max_tokens": 300, "temperature": 0.7, "seed": 7},
        ),
    ],
)
async def test_every_call_of_a_run_carries_what_the_user_set(
    tmp_path: Path, entry: dict[str, Any], flags: dict[str, Any], wire: dict[str, Any]
) -> None:
    async with SimProvider(SimConfig(), record=500) as sim:
        options = RunOptions(
            task=GOAL,
            agents=3,
            model="local",
            config_path=_config(tmp_path, sim.base_url, **entry),
            out_dir=str(tmp_path / "out"),
            embedder="lexical",
            **flags,
        )
        report = await deploy(options, store_url=f"sqlite:///{tmp_path / 'fleet.db'}", api_key="sk-local")
        bodies = [r.body for r in sim.received or () if r.path.endswith("/chat/completions")]
    assert report.status == "completed", report.summary
    roles = _roles(bodies)
    assert roles["planner"] == 1 and roles["agent"] >= 3 and roles["verifier"] >= 1, roles
    for body in bodies:
        assert {k: body.get(k) for k in wire} == wire, body
        assert body["tool_choice"] == "auto"  # tools are offered on every one of these calls
