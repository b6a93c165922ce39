"""What the gateway reports about itself, and budget raises applied to a live gateway."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agent_fleet.spend.limiter import LimiterStatistics

if TYPE_CHECKING:
    from agent_fleet.spend.gateway import Gateway

__all__ = ["GatewayStatistics", "apply_budget_event"]


@dataclass(frozen=True, slots=True)
class GatewayStatistics:
    concurrency: LimiterStatistics
    in_flight: int
    reserved_tokens: int
    reserved_usd: Decimal
    open_reservations: int
    run: dict[str, Any]
    breakers: dict[str, str]
    exhausted_models: tuple[str, ...]
    limits: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": {
                "borrowed": self.concurrency.borrowed_tokens,
                "total": self.concurrency.total_tokens,
                "waiting": self.concurrency.tasks_waiting,
            },
            "in_flight": self.in_flight,
            "reserved_tokens": self.reserved_tokens,
            "reserved_usd": str(self.reserved_usd),
            "open_reservations": self.open_reservations,
            "run": self.run,
            "breakers": self.breakers,
            "exhausted_models": list(self.exhausted_models),
            "limits": self.limits,
        }


def apply_budget_event(gateway: Gateway, session_or_run_id: str, data: Mapping[str, Any]) -> None:
    """Apply a ``budget_raised`` event's data ``{tokens?, usd?}`` (new cap values) to a live gateway.

    A session id sets that session's caps. The run id (``gateway.run_id``) sets every session's token
    cap (and the default for sessions to come); its ``usd`` sets the fleet dollar cap when the run has
    one, else every session's dollar cap.
    """
    tokens = data.get("tokens")
    usd = data.get("usd")
    if session_or_run_id == gateway.run_id:
        if tokens is not None:
            gateway.set_all_session_budgets(tokens=int(tokens))
        if usd is not None:
            if gateway.book.run.cap_usd is not None:
                gateway.set_run_budget(usd=Decimal(str(usd)))
            else:
                gateway.set_all_session_budgets(usd=usd)
        return
    gateway.set_session_budget(session_or_run_id, tokens=tokens, usd=usd)
