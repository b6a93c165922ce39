"""The usage meter: tokens, calls, errors and list-price cost, per session, per model and for the run.

Every record updates the session's tally, the model's tally and the run's tally in one synchronous
step, so the run's figures are always exactly the sum of its sessions'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_fleet.domain.errors import ErrorKind, error_kind
from agent_fleet.domain.usage import Usage

__all__ = ["ERROR_KINDS", "Meter", "Tally", "error_kind"]

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


class Meter:
    def __init__(self) -> None:
        self.run = Tally()
        self.sessions: dict[str, Tally] = {}
        self.models: dict[str, Tally] = {}

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

    def charge(self, session_id: str, model: str, usage: Usage, cost: Decimal, *, calls: int = 1) -> None:
        self.session(session_id).add(usage, cost, calls)
        self.model(model).add(usage, cost, calls)
        self.run.add(usage, cost, calls)

    def error(self, session_id: str, model: str, kind: ErrorKind) -> None:
        for tally in (self.session(session_id), self.model(model), self.run):
            tally.errors[str(kind)] = tally.errors.get(str(kind), 0) + 1
