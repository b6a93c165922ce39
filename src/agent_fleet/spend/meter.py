"""The usage meter: tokens, calls, errors and list-price cost, per session, per model and for the run
(the gateway's: one run for ``deploy``, the whole server for ``serve``) — and per group a run is
assigned to (its LocalQueue, its team) and per run and model.

Every record updates all of those tallies in one synchronous step, so the run's figures are always
exactly the sum of its sessions', and a team's the sum of its runs'. This is the one place spend is
counted; a group's tally seeded from the store (:meth:`Meter.seed`) carries what earlier processes spent.
A part of the engine that reports its own share (a run's verifier calls, its embeddings) reads it
through a :class:`MeterWindow` over its sessions and counts nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.accounts import run_of
from agent_fleet.domain.error_kinds import ErrorKind, error_kind
from agent_fleet.domain.usage import Usage

__all__ = ["ERROR_KINDS", "Meter", "MeterWindow", "Spent", "Tally", "error_kind"]

ERROR_KINDS: tuple[str, ...] = tuple(ErrorKind)
"""Every kind is always counted (zero included), so the meter, the summary and the metrics list the same keys."""


def _errors() -> dict[str, int]:
    return dict.fromkeys(ERROR_KINDS, 0)


@dataclass(slots=True)
class Tally:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    calls: int = 0
    cost_usd: Decimal = Decimal(0)
    errors: dict[str, int] = field(default_factory=_errors)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_input_tokens, self.cache_write_tokens)

    def add(self, usage: Usage, cost: Decimal, calls: int = 1) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_input_tokens += usage.cached_input_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.calls += calls
        self.cost_usd += cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "cached_input": self.cached_input_tokens,
                "cache_write": self.cache_write_tokens,
                "total": self.total_tokens,
            },
            "llm_calls": self.calls,
            "cost_usd": str(self.cost_usd),
            "errors": dict(self.errors),
        }


Group = tuple[str, str]  # (scope, key): ("queue", "ns/name"), ("team", "alpha")


class Meter:
    def __init__(self) -> None:
        self.run = Tally()
        self.sessions: dict[str, Tally] = {}
        self.models: dict[str, Tally] = {}
        self.groups: dict[Group, Tally] = {}
        self.run_models: dict[str, dict[str, Tally]] = {}  # run id → model → its tally
        self._run_groups: dict[str, tuple[Group, ...]] = {}

    def session(self, session_id: str) -> Tally:
        tally = self.sessions.get(session_id)
        if tally is None:
            tally = self.sessions[session_id] = Tally()
        return tally

    def model(self, model: str) -> Tally:
        tally = self.models.get(model)
        if tally is None:
            tally = self.models[model] = Tally()
        return tally

    def group(self, group: Group) -> Tally:
        tally = self.groups.get(group)
        if tally is None:
            tally = self.groups[group] = Tally()
        return tally

    def assign(self, run_id: str, groups: tuple[Group, ...]) -> None:
        """Every later record of the run's sessions counts for ``groups`` too."""
        self._run_groups[run_id] = groups
        for g in groups:
            self.group(g)

    def groups_of(self, session_id: str) -> tuple[Group, ...]:
        return self._run_groups.get(run_of(session_id), ())

    def _tallies(self, session_id: str, model: str) -> list[Tally]:
        run_id = run_of(session_id)
        per_run = self.run_models.setdefault(run_id, {})
        by_model = per_run.get(model)
        if by_model is None:
            by_model = per_run[model] = Tally()
        found = [self.session(session_id), self.model(model), self.run, by_model]
        return found + [self.group(g) for g in self._run_groups.get(run_id, ())]

    def charge(self, session_id: str, model: str, usage: Usage, cost: Decimal, *, calls: int = 1) -> None:
        for tally in self._tallies(session_id, model):
            tally.add(usage, cost, calls)

    def error(self, session_id: str, model: str, kind: ErrorKind) -> None:
        for tally in self._tallies(session_id, model):
            tally.errors[str(kind)] = tally.errors.get(str(kind), 0) + 1

    def seed(self, group: Group | None, usage: Usage, cost: Decimal, calls: int) -> None:
        """What earlier processes spent for ``group`` (None: the gateway's run tally), read from the store."""
        (self.run if group is None else self.group(group)).add(usage, cost, calls)


@dataclass(frozen=True, slots=True)
class Spent:
    usage: Usage = field(default_factory=Usage)
    cost: Decimal = Decimal(0)
    calls: int = 0


def _spent(tally: Tally) -> Spent:
    return Spent(tally.usage, tally.cost_usd, tally.calls)


def _minus(a: Spent, b: Spent) -> Spent:
    u, v = a.usage, b.usage
    usage = Usage(
        u.input_tokens - v.input_tokens,
        u.output_tokens - v.output_tokens,
        u.cached_input_tokens - v.cached_input_tokens,
        u.cache_write_tokens - v.cache_write_tokens,
    )
    return Spent(usage, a.cost - b.cost, a.calls - b.calls)


class MeterWindow:
    """What the meter charged some sessions since each was first watched (or since the last
    :meth:`take`): a view of the meter's session tallies, never a count of its own. Watch a session
    before its first call through the window's owner; the sessions are its own (nothing else charges
    them, nothing restores into them)."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter
        self._base: dict[str, Spent] = {}

    def watch(self, session_id: str) -> None:
        if session_id not in self._base:
            self._base[session_id] = _spent(self._meter.session(session_id))

    def spent(self) -> Spent:
        usage, cost, calls = Usage(), Decimal(0), 0
        for session_id, base in self._base.items():
            d = _minus(_spent(self._meter.session(session_id)), base)
            usage, cost, calls = usage + d.usage, cost + d.cost, calls + d.calls
        return Spent(usage, cost, calls)

    def take(self) -> Spent:
        """What was charged since the last take (or the watch), and start again from now."""
        out = self.spent()
        for session_id in self._base:
            self._base[session_id] = _spent(self._meter.session(session_id))
        return out
