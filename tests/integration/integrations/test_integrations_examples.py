"""Every script in ``examples/`` runs offline, against the simulated provider, and says what it did."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# script → (the package its extra brings, lines its output must hold)
CASES = {
    "langgraph_fleet.py": ("langgraph", ["paused on budget; raising it", "tally: {"]),
    "crewai_fleet.py": ("crewai", ["agent tools: ['Fleet run']", "completed: 4 results"]),
    "mcp_client.py": (
        "mcp",
        ["tools: ['budget_raise', 'deploy', 'events', 'results', 'review', 'status']", "completed"],
    ),
    "otel_spans.py": ("opentelemetry.sdk", ["'fleet.run': 1", "run-"]),
    "a2a_client.py": ("a2a", ["skills: ['fleet-run']", "state: TASK_STATE_COMPLETED", "completed: "]),
}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(CASES)


@pytest.mark.parametrize("script", sorted(CASES))
def test_the_example_runs(script: str) -> None:
    package, expected = CASES[script]
    if importlib.util.find_spec(package.split(".")[0]) is None and os.environ.get("FLEET_REQUIRE_INTEGRATIONS") != "1":
        pytest.skip(f"{package} is not installed (its extra)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_", "OTEL_"))}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in expected:
        assert line in proc.stdout, proc.stdout
