"""``/metrics``: the runs' stored families merged, and the fleet families read off the log.

Stored, merged (:mod:`.merge`): ``fleet_*`` per run and model as each run's engine renders them
(:mod:`agent_fleet.observe.metrics`), and Kueue's ``kueue_*`` per ClusterQueue.

Added here, from the log: ``fleet_run_info{run,team,queue,state}`` (join a run's families to its team),
``fleet_team_*`` per team (a server's durable tallies of every call of each team's runs, where the
reader has them; else folded from the runs it follows), ``fleet_run_cost_forecast_usd``, and the spend canary —
``fleet_session_budget_used_ratio{team,run,session}`` for the ``top_k`` live sessions nearest their
budget, and ``fleet_sessions_near_budget{team}``, live sessions at or above the ``near_budget`` share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agent_fleet.observe.dashboard.reader import FleetReader

__all__ = ["exposition"]


class _Families(Collector):
    def __init__(self, reader: FleetReader) -> None:
        self._reader = reader

    def collect(self) -> Iterator[Any]:
        yield from self._reader.merged.families()
        yield from self._runs()
        yield from self._teams()
        yield from self._canary()

    def _runs(self) -> Iterator[Any]:
        info = GaugeMetricFamily(
            "fleet_run_info", "A run's team, queue and state.", labels=["run", "team", "queue", "state"]
        )
        forecast = GaugeMetricFamily(
            "fleet_run_cost_forecast_usd", "The run's forecast list cost.", labels=["run", "team", "bound"]
        )
        for run in sorted(self._reader.runs.values(), key=lambda r: r.run_id):
            queue = str(run.options.get("queue") or "default")
            info.add_metric([run.run_id, run.team, queue, run.record.state.value], 1)
            cost = (run.forecast or {}).get("cost_usd")
            if isinstance(cost, dict):
                for bound in ("low", "high"):
                    forecast.add_metric([run.run_id, run.team, bound], float(cost.get(bound, 0)))
        yield info
        yield forecast

    def _teams(self) -> Iterator[Any]:
        tokens: dict[str, int] = defaultdict(int)
        cost: dict[str, Decimal] = defaultdict(Decimal)
        calls: dict[str, int] = defaultdict(int)
        errors: dict[str, int] = defaultdict(int)
        states: dict[tuple[str, str], int] = defaultdict(int)
        for run in self._reader.runs.values():
            tokens[run.team] += run.tokens()
            cost[run.team] += run.cost()
            calls[run.team] += run.calls()
            for s in run.sessions.values():
                errors[run.team] += s.errors
                states[(run.team, s.state)] += 1
        tallies = self._reader.tallies() if self._reader.tallies is not None else {}
        for team, tally in tallies.items():  # a server's own count of its teams: durable, every run
            tokens[team], cost[team], calls[team] = tally.tokens, tally.cost_usd, tally.calls
            errors[team] = tally.errors
        t = CounterMetricFamily("fleet_team_tokens", "Model tokens of the team's sessions.", labels=["team"])
        c = CounterMetricFamily("fleet_team_cost_usd", "List-price dollars of the team's sessions.", labels=["team"])
        r = CounterMetricFamily("fleet_team_llm_requests", "Model calls answered, by team.", labels=["team"])
        e = CounterMetricFamily("fleet_team_llm_errors", "Model call errors and retries, by team.", labels=["team"])
        for team in sorted(tokens):
            t.add_metric([team], tokens[team])
            c.add_metric([team], float(cost[team]))
            r.add_metric([team], calls[team])
            e.add_metric([team], errors[team])
        g = GaugeMetricFamily("fleet_team_sessions", "Agent sessions by team and state.", labels=["team", "state"])
        for (team, state), n in sorted(states.items()):
            g.add_metric([team, state], n)
        yield from (t, c, r, e, g)

    def _canary(self) -> Iterator[Any]:
        opts = self._reader.options
        rows = [(ratio, run, s) for run in self._reader.runs.values() for ratio, s in run.ratios()]
        rows.sort(key=lambda r: (-r[0], r[2].session_id))
        ratio = GaugeMetricFamily(
            "fleet_session_budget_used_ratio",
            f"Share of its tightest budget a live session has spent (the {opts.top_k} highest).",
            labels=["team", "run", "session"],
        )
        for value, run, s in rows[: opts.top_k]:
            ratio.add_metric([run.team, run.run_id, s.session_id], round(value, 6))
        near = GaugeMetricFamily(
            "fleet_sessions_near_budget",
            f"Live sessions that have spent at least {opts.near_budget:g} of their budget.",
            labels=["team"],
        )
        counts: dict[str, int] = {run.team: 0 for run in self._reader.runs.values()}
        for value, run, _ in rows:
            if value >= opts.near_budget:
                counts[run.team] += 1
        for team, n in sorted(counts.items()):
            near.add_metric([team], n)
        yield ratio
        yield near


def exposition(reader: FleetReader) -> bytes:
    """Prometheus text of everything the reader follows (call :meth:`FleetReader.refresh` first)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(reader))
    return bytes(generate_latest(registry))
