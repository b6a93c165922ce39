"""The fleet as the session log shows it, kept up to date incrementally.

:class:`FleetReader` reads only through the :class:`~agent_fleet.session.port.SessionLog` port: the run
streams, each run's agent sessions (only those whose ``last_seq`` moved are read again, and only their
new events) and the ``metrics:RUN`` snapshots live runs store every tick. So a dashboard or a scrape in
one process shows runs that other processes drive. It never writes.

Refreshes are pulled: :meth:`refresh` reads at most once per ``interval`` of the injected clock, however
many pages and scrapers ask.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.clock import Clock, RealClock
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType, SessionRecord, SessionState
from agent_fleet.domain.ledger import Tally, run_calls
from agent_fleet.domain.payloads import BudgetRaised, ChangesIntegrated, RunCreated, RunEnded
from agent_fleet.observe.dashboard.figures import Budget, SessionFigures, budget_of_run, used_ratio
from agent_fleet.observe.dashboard.merge import MergedFamilies, merge_texts
from agent_fleet.observe.metrics import metrics_key
from agent_fleet.session.port import SessionLog

__all__ = ["FleetReader", "ReaderOptions", "RunView", "TeamTally", "team_of"]

_EVENT_TEXT_LIMIT = 4000  # characters of one event's data sent to a page; the log keeps it whole


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderOptions:
    interval: float = 0.5  # seconds between two reads of the log
    runs: int = 50  # newest runs followed
    near_budget: float = 0.8  # fleet_sessions_near_budget counts live sessions at or above this share
    top_k: int = 20  # sessions exported in fleet_session_budget_used_ratio
    history: int = 600  # points of the time series kept (one per refresh)


def team_of(options: dict[str, Any]) -> str:
    """A run's team: its ``team`` option, else its LocalQueue's namespace (``ns/name``), else the queue."""
    team = options.get("team")
    if team:
        return str(team)
    queue = str(options.get("queue") or "default")
    return queue.split("/", 1)[0]


@dataclass(frozen=True, slots=True)
class TeamTally:
    """What a team spent, as a server's meter counts it (every call of all its runs, kept durable)."""

    tokens: int
    cost_usd: Decimal
    calls: int
    errors: int


@dataclass(slots=True)
class RunView:
    record: SessionRecord
    options: dict[str, Any] = field(default_factory=dict)
    task: str = ""
    forecast: dict[str, Any] | None = None
    budget: Budget = field(default_factory=Budget)
    seen_seq: int = 0
    sessions: dict[str, SessionFigures] = field(default_factory=dict)
    metrics_text: str = ""
    admission_source: str = ""  # the admission controller its kueue_* families are of
    gateway_source: str = ""  # the gateway its concurrency gauges are of (runs of one server share one)
    summary: dict[str, Any] | None = None
    # calls recorded in the run's own stream (planner, verifier, provider embeddings), as status counts them
    own_calls: Tally = field(default_factory=Tally)
    merged: int | None = None  # changes merged into the run's branch (None: not merged yet)

    @property
    def run_id(self) -> str:
        return self.record.session_id

    @property
    def live(self) -> bool:
        return self.record.state is SessionState.RUNNING

    @property
    def team(self) -> str:
        return team_of(self.options)

    def fold_run_event(self, ev: Event) -> None:
        self.seen_seq = max(self.seen_seq, ev.seq)
        calls = run_calls(ev)
        if calls is not None:
            self.own_calls.add(calls.usage, calls.cost_usd, calls.calls)
        p = decode(ev)
        if isinstance(p, RunCreated):
            self.options = dict(p.options)
            self.task = p.task
            self.forecast = None if p.forecast is None else dict(p.forecast)
            self.budget = budget_of_run(self.options)
        elif isinstance(p, BudgetRaised):
            # a run-wide dollar raise moves the fleet cap, not the sessions'
            usd = None if self.options.get("fleet_budget_usd") is not None else p.usd
            self.budget = self.budget.raised(p.tokens, usd)
        elif isinstance(p, RunEnded) and ev.type != EventType.RUN_FAILED:
            self.summary = None if p.summary is None else dict(p.summary)
        elif isinstance(p, ChangesIntegrated):
            self.merged = p.merged

    def cost(self) -> Decimal:
        """What the run spent as ``status`` counts it: its sessions' calls and its own stream's."""
        return sum((s.cost_usd for s in self.sessions.values()), self.own_calls.cost_usd)

    def tokens(self) -> int:
        return sum((s.tokens for s in self.sessions.values()), self.own_calls.usage.total_tokens)

    def calls(self) -> int:
        return sum((s.calls for s in self.sessions.values()), self.own_calls.calls)

    def ratios(self) -> list[tuple[float, SessionFigures]]:
        """Budget used share of every session that has not ended, highest first."""
        rows = [
            (used_ratio(s.tokens, s.cost_usd, s.budget(self.budget)), s)
            for s in self.sessions.values()
            if s.state not in (SessionState.COMPLETED, SessionState.FAILED)
        ]
        return sorted(rows, key=lambda r: (-r[0], r[1].session_id))


@dataclass(frozen=True, slots=True)
class Point:
    t: float  # the reader's clock (rates)
    at: float  # wall-clock seconds since the epoch (what a page draws)
    tokens: int
    calls: int
    errors: int
    active: int
    concurrency_limit: float
    in_flight: float


class FleetReader:
    """Follows the newest runs of one session log."""

    def __init__(
        self,
        log: SessionLog,
        *,
        clock: Clock | None = None,
        wall_clock: Callable[[], float] = time.time,
        options: ReaderOptions | None = None,
        tallies: Callable[[], Mapping[str, TeamTally]] | None = None,
    ) -> None:
        self.log = log
        self.tallies = tallies  # a server's team tallies (fleet_team_*), when it has them
        self.clock = clock or RealClock()
        self.wall_clock = wall_clock
        self.options = options or ReaderOptions()
        self.runs: dict[str, RunView] = {}
        self.merged = MergedFamilies()
        self.history: deque[Point] = deque(maxlen=self.options.history)
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    async def refresh(self, *, force: bool = False) -> None:
        """Read what changed since the last read, unless that was less than ``interval`` ago."""
        async with self._lock:
            now = self.clock.now()
            if not force and self._read_at is not None and now - self._read_at < self.options.interval:
                return
            records = await self.log.list_runs(self.options.runs)
            for rec in records:
                await self._refresh_run(rec)
            keep = {r.session_id for r in records}
            for gone in [rid for rid in self.runs if rid not in keep]:
                del self.runs[gone]
            self.merged = merge_texts(
                [(r.metrics_text, r.live, r.admission_source) for r in self.runs.values() if r.metrics_text]
            )
            self._read_at = now
            self.history.append(self._point(now))

    async def _refresh_run(self, rec: SessionRecord) -> None:
        view = self.runs.get(rec.session_id)
        changed = view is None or rec.last_seq != view.record.last_seq or view.live
        if view is None:
            view = self.runs[rec.session_id] = RunView(record=rec)
        view.record = rec
        if not changed:
            return
        for ev in await self.log.get_events(rec.session_id, after=view.seen_seq):
            view.fold_run_event(ev)
        records = await self.log.list_sessions(rec.session_id)
        if not view.sessions and records:  # a run seen for the first time: all its events in one read
            for ev in await self.log.events_of_run(rec.session_id):
                figs = view.sessions.get(ev.session_id)
                if figs is None:
                    figs = view.sessions[ev.session_id] = SessionFigures(ev.session_id)
                figs.fold(ev)
        for srec in records:
            figs = view.sessions.get(srec.session_id)
            if figs is None:
                figs = view.sessions[srec.session_id] = SessionFigures(srec.session_id)
            figs.state = srec.state.value
            if srec.last_seq > figs.seen_seq:
                for ev in await self.log.get_events(srec.session_id, after=figs.seen_seq):
                    figs.fold(ev)
        snap = await self.log.get_snapshot(metrics_key(rec.session_id))
        view.metrics_text = str(snap.get("text", "")) if snap else ""
        view.admission_source = str(snap.get("admission_source", "")) if snap else ""
        view.gateway_source = str(snap.get("gateway_source", "")) if snap else ""

    def _point(self, now: float) -> Point:
        tokens = calls = errors = active = 0
        for run in self.runs.values():
            tokens += run.tokens()
            calls += run.calls()
            for s in run.sessions.values():
                errors += s.errors
                active += s.state == SessionState.RUNNING
        limit = self._gateway_gauge("fleet_api_concurrency_limit")
        in_flight = self._gateway_gauge("fleet_llm_requests_in_flight")
        return Point(now, self.wall_clock(), tokens, calls, errors, active, limit, in_flight)

    def _live_gauge(self, name: str) -> dict[str, float]:
        """A per-run gauge's value for every live run."""
        live = {rid for rid, r in self.runs.items() if r.live}
        return {
            dict(labels).get("run", ""): v
            for labels, v in self.merged.values(name).items()
            if dict(labels).get("run") in live
        }

    def _gateway_gauge(self, name: str) -> float:
        """A gateway's gauge over the live runs: counted once per gateway (the runs of one server share
        one gateway, and so its one concurrency limit), summed over separate gateways."""
        by_gateway: dict[str, float] = {}
        for run_id, value in self._live_gauge(name).items():
            run = self.runs.get(run_id)
            source = run.gateway_source if run is not None and run.gateway_source else f"run:{run_id}"
            by_gateway[source] = max(by_gateway.get(source, 0.0), value)
        return sum(by_gateway.values())

    # -- what pages read ---------------------------------------------------------------------------
    def rate(self, window: float = 5.0) -> tuple[float, float]:
        """(tokens/s, error rate) over the last ``window`` seconds of history."""
        if len(self.history) < 2:
            return 0.0, 0.0
        last = self.history[-1]
        first = next((p for p in self.history if last.t - p.t <= window), last)
        if first is last:
            first = self.history[-2]
        dt = last.t - first.t
        tokens_per_s = (last.tokens - first.tokens) / dt if dt > 0 else 0.0
        calls = (last.calls - first.calls) + (last.errors - first.errors)
        error_rate = (last.errors - first.errors) / calls if calls > 0 else 0.0
        return tokens_per_s, error_rate

    async def session_events(self, session_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        """A session's events after ``seq``, each with its data cut to a page's worth."""
        events = await self.log.get_events(session_id, after=after)
        return [_shown(ev) for ev in events[:limit]]


def _shown(ev: Event) -> dict[str, Any]:
    row = ev.to_dict()
    text = json.dumps(row["data"], default=str)
    if len(text) > _EVENT_TEXT_LIMIT:
        row["data"] = {"truncated": text[:_EVENT_TEXT_LIMIT], "size": len(text)}
    return row
