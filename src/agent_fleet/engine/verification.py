"""Cross-fleet verification of a run's results, wired to the engine's gateway and session log.

A seeded sample of the unique results goes to verifier calls — a model of another tier when
fleet.yaml has one — each under its own session id ``RUN.vNNNN`` so the gateway meters and budgets
it like any agent session. The outcome is recorded in the run's stream (``verification``, and an
``alarm`` when agreement drops below the threshold), so the summary still equals the log and a
resumed run reuses the verdicts instead of paying for them twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from agent_fleet.aggregate import (
    ModelVerifier,
    Verdict,
    VerdictKind,
    VerificationConfig,
    VerificationReport,
    verify_results,
)
from agent_fleet.config import FleetConfig
from agent_fleet.domain.events import EventType
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.plan import InputKind, Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.gateway import Gateway

__all__ = ["VerificationOutcome", "verify_run"]

_MAX_FILE_CHARS = 12_000


@dataclass(frozen=True, slots=True)
class VerificationOutcome:
    results: list[ResultItem]  # the unique results, the sampled ones annotated
    summary: dict[str, Any]  # report figures, verifier model, calls, tokens and cost
    usage: Usage
    cost_usd: Decimal


class _Metered:
    """The gateway, adding up what the verifier calls cost (for the log and the summary)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self.usage = Usage()
        self.cost = Decimal(0)
        self.calls = 0

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        response = await self._gateway.complete(session_id, request)
        self.usage = self.usage + response.usage
        self.cost += response.cost_usd
        self.calls += 1
        return response

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        self._gateway.restore_spent(session_id, usage, cost_usd)

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        return self._gateway.unanswered_charge(request)


def _verifier_model(config: FleetConfig, run_model: str) -> str:
    """fleet.yaml's choice; else a model of another tier than the run's; else the run's own."""
    chosen = config.verification.model
    if chosen:
        m = config.model(chosen)
        return m.model if m is not None else chosen
    mine = config.model(run_model)
    for m in config.models:
        if (mine is None or m.tier != mine.tier) and m.model != run_model:
            return m.model
    return run_model


def _partition_inputs(plan: Plan) -> Any:
    """result → what the verifier is shown: the list items, or the partition's files (the cited one first)."""
    parts = {p.id: p for p in plan.partitions}
    root = Path(plan.input_path) if plan.kind is InputKind.DIRECTORY and plan.input_path else None

    def read(rel: str) -> str:
        assert root is not None
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"=== {rel} === (unreadable: {exc.strerror})"
        return f"=== {rel} ===\n{text[:_MAX_FILE_CHARS]}"

    def items(result: ResultItem) -> Sequence[str]:
        part = parts.get(result.partition_id)
        if part is None:
            return []
        if root is None:
            return list(part.items)
        cited = (result.location or "").split(":", 1)[0]
        order = sorted(part.items, key=lambda p: p != cited)
        return [read(p) for p in order]

    return items


async def verify_run(
    *,
    log: SessionLog,
    gateway: Gateway,
    run_id: str,
    plan: Plan,
    run_model: str,
    config: FleetConfig,
    unique: list[ResultItem],
) -> VerificationOutcome | None:
    settings = config.verification
    if settings.fraction == 0 and settings.minimum == 0:
        return None
    recorded = None
    for ev in await log.get_events(run_id):
        if ev.type == EventType.VERIFICATION:
            recorded = ev.data
    if recorded is not None and set(recorded["verdicts"]) | set(recorded["skipped"]) <= {r.id for r in unique}:
        report = VerificationReport(
            sampled=int(recorded["report"]["sampled"]),
            verdicts={
                k: Verdict(VerdictKind(v["status"]), v["reason"], v["verifier"])
                for k, v in recorded["verdicts"].items()
            },
            threshold=settings.threshold,
            confidence=float(recorded["report"]["confidence"]),
            skipped=dict(recorded["skipped"]),
        )
        usage, cost, calls, model = (
            Usage.from_dict(recorded["usage"]),
            Decimal(recorded["cost_usd"]),
            int(recorded["calls"]),
            recorded["model"],
        )
    else:
        model = _verifier_model(config, run_model)
        metered = _Metered(gateway)
        numbers: dict[str, int] = {}

        def session_for(result: ResultItem) -> str:
            return f"{run_id}.v{numbers.setdefault(result.id, len(numbers)):04d}"

        verifier = ModelVerifier(metered, model=model, session_for=session_for)
        items = _partition_inputs(plan)
        report = await verify_results(
            unique,
            verifier,
            lambda r: items(r),
            config=VerificationConfig(
                fraction=settings.fraction,
                minimum=settings.minimum,
                maximum=settings.maximum,
                seed=settings.seed,
                threshold=settings.threshold,
            ),
        )
        usage, cost, calls = metered.usage, metered.cost, metered.calls
        data = {
            "report": report.to_dict(),
            "verdicts": {k: v.to_dict() for k, v in report.verdicts.items()},
            "skipped": report.skipped,
            "model": model,
            "calls": calls,
            "usage": usage.to_dict(),
            "cost_usd": str(cost),
        }
        events: list[tuple[str, dict[str, Any]]] = [(EventType.VERIFICATION, data)]
        alarm = report.alarm_event()
        if alarm is not None:
            events.append((EventType.ALARM, alarm))
        await log.emit_events(run_id, events)
    summary = {
        **report.to_dict(),
        "model": model,
        "calls": calls,
        "tokens": usage.total_tokens,
        "cost_usd": float(cost),
    }
    annotated = await asyncio.to_thread(report.annotate, unique)
    return VerificationOutcome(annotated, summary, usage, cost)
