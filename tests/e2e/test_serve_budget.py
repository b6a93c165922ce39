"""A team's budget covers every call of its runs, its tally is durable, and the figures agree.

Team gamma's first run is a goal (its planner's call plans it), embeds through the provider and is
verified: the simulated provider's bill equals what the team's tally counts, token for token, and the
run's figures are the same in ``status``, ``/metrics`` and the dashboard (and, once it ended, it exports
no gauge). The server restarts with gamma's budget a little above what it spent: its tally is what the
store says, its next run pauses once the budget is reached — the team spends at most one call beyond
it — and a new run is refused. After ``kill -9`` and a restart the tally is unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from .conftest import write_lines
from .test_planner import GOAL
from .test_serve import ADMIN, TOKEN_C, Served, _provider_stats, _reset, _wait_ended, provider, serve_process
from .test_serve_cohort import _metric

__all__ = ["provider"]


def _fleet_yaml(budget: Decimal) -> str:
    return f"""
rate_limit: {{baseline_concurrency: 4, adaptive: false}}
verification: {{fraction: 1.0, minimum: 5}}
teams:
  gamma: {{token_env: GAMMA_TOKEN, budget_usd: {budget}}}
  alpha: {{token_env: ALPHA_TOKEN}}
"""


def _team(served: Served) -> dict[str, Any]:
    """What gamma spent, as the server's tally has it (its budget aside)."""
    with served.client(TOKEN_C) as gamma:
        (team,) = gamma.get("/v1/teams").json()["teams"]
    assert team["team"] == "gamma"
    return {k: v for k, v in team.items() if k != "budget_usd"}


def _billed(provider: str) -> int:
    stats = _provider_stats(provider)
    return int(stats["tokens_in"] + stats["tokens_out"])


def _call_costs(served: Served, run_id: str) -> list[Decimal]:
    """What each answered agent call of the run cost, from its sessions' logs."""
    costs = []
    with served.client(TOKEN_C) as gamma:
        for s in range(int(gamma.get(f"/v1/runs/{run_id}").json()["partitions"])):
            events = gamma.get(f"/v1/runs/{run_id}/events", params={"session": f"{run_id}.s{s:05d}"}).json()
            costs += [
                Decimal(e["data"]["response"]["cost_usd"]) for e in events["events"] if e["type"] == "model_response"
            ]
    return costs


@pytest.fixture
def cwd(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def test_a_teams_budget_covers_every_call_and_its_tally_survives_kill_9(cwd: Path, provider: str) -> None:
    # -- a run that plans, embeds through the provider and verifies, within a large budget
    with serve_process(cwd, provider, _fleet_yaml(Decimal(1))) as served:
        _reset(provider)
        with served.client(TOKEN_C) as gamma, served.client(ADMIN) as admin:
            body = {"task": GOAL, "agents": 6, "embedder": "provider"}
            first = gamma.post("/v1/runs", json=body).json()["run_id"]
            done = _wait_ended(gamma, first)
            assert done["status"] == "completed", done
            summary = done["summary"]
            assert summary["planner"]["calls"] == 1 and summary["verification"]["judged"] >= 4, summary
            team = _team(served)
            assert team["tokens"]["total"] == _billed(provider) == summary["tokens"]["total"]  # every call
            assert team["llm_calls"] == summary["llm_calls"]
            # one run's figures, three ways: status, /metrics, the dashboard
            metrics = admin.get("/metrics").text
            row = admin.get(f"/api/runs/{first}").json()
        assert _metric(metrics, "fleet_tokens_total", run=first) == summary["tokens"]["total"]
        assert _metric(metrics, "fleet_llm_requests_total", run=first, outcome="ok") == summary["llm_calls"]
        assert _metric(metrics, "fleet_team_tokens_total", team="gamma") == team["tokens"]["total"]
        assert (row["tokens"], row["calls"]) == (summary["tokens"]["total"], summary["llm_calls"])
        assert abs(row["cost_usd"] - summary["cost_usd"]) < 1e-9
        assert f'fleet_api_concurrency_limit{{run="{first}"}}' not in metrics  # an ended run: no gauge
        assert f'fleet_sessions{{run="{first}"' not in metrics
        spent = Decimal(team["cost_usd"])
        one_call = max(_call_costs(served, first))

    # -- restarted with a budget two calls above what gamma spent: the next run stops at it
    budget = spent + 2 * one_call
    with serve_process(cwd, provider, _fleet_yaml(budget)) as served:
        assert _team(served) == team  # the tally is what the store says
        write_lines(cwd / "inputs" / "gamma" / "urls.txt", 16)
        with served.client(TOKEN_C) as gamma:
            body = {"task": "Summarise each page", "input_path": "inputs/gamma/urls.txt", "agents": 4}
            second = gamma.post("/v1/runs", json={**body, "embedder": "lexical"}).json()["run_id"]
            done = _wait_ended(gamma, second)
            assert done["status"] == "paused", done
            team = _team(served)
            overshoot = Decimal(team["cost_usd"]) - budget
            calls = _call_costs(served, second)
            assert Decimal(0) <= overshoot < max(calls), (overshoot, calls)  # within one call of the budget
            assert team["tokens"]["total"] == _billed(provider)
            refused = gamma.post("/v1/runs", json=body)
            assert refused.status_code == 403 and "budget" in refused.json()["error"]["message"], refused.text
        served.proc.kill()  # SIGKILL: nothing of the server runs its way out
        served.proc.wait(timeout=30)

    with serve_process(cwd, provider, _fleet_yaml(budget)) as served:
        deadline = time.monotonic() + 30
        while _team(served) != team:  # the same, exactly: tokens, dollars, calls
            assert time.monotonic() < deadline, (_team(served), team)
            time.sleep(0.2)
