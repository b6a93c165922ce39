"""Cross-fleet verification: an independent verifier judges a seeded random sample of the results.

Each sampled result is judged against its partition (confirm / refute / unsure, with a reason).
The agreement rate is ``confirmed / (confirmed + refuted)`` — an "unsure" is no evidence either
way and is reported apart — with a Wilson score interval. An agreement below the threshold (or a
sample with no decisive verdict at all) raises an alarm and marks the output as needing review.

Verifier calls go through the gateway under their own session ids, so their spend is metered and
budgeted like any agent session; when a budget stops them the remaining results stay unverified.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from statistics import NormalDist
from typing import Any, Protocol

from agent_fleet.domain.calls import CallShape
from agent_fleet.domain.model import ChatRequest, ToolSpec
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import BudgetExhausted, FleetError
from agent_fleet.spend.port import ModelGateway

__all__ = [
    "SUBMIT_VERDICT",
    "ModelVerifier",
    "VerdictKind",
    "Verdict",
    "VerificationConfig",
    "VerificationReport",
    "Verifier",
    "Judging",
    "sample_for_verification",
    "sample_key",
    "sample_size",
    "verify_results",
    "wilson_interval",
]


class VerdictKind(StrEnum):
    CONFIRM = "confirm"
    REFUTE = "refute"
    UNSURE = "unsure"


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: VerdictKind
    reason: str
    verifier: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"status": str(self.verdict), "reason": self.reason, "verifier": self.verifier}


class Verifier(Protocol):
    async def judge(self, result: ResultItem, partition_items: Sequence[str]) -> Verdict: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class VerificationConfig:
    fraction: float = 0.05  # share of the unique results to verify
    minimum: int = 5  # but at least this many (all of them when there are fewer)
    maximum: int | None = None  # and at most this many
    seed: int = 0
    threshold: float = 0.8  # agreement below this raises the alarm
    confidence: float = 0.95  # of the reported interval
    concurrency: int = 8


def sample_size(n: int, *, fraction: float, minimum: int, maximum: int | None = None) -> int:
    """How many of ``n`` results are verified: ``max(minimum, ceil(fraction * n))``, at most ``maximum``
    and at most ``n``."""
    k = min(n, max(minimum, math.ceil(fraction * n)))
    return k if maximum is None else min(k, maximum)


def sample_key(seed: int, result_id: str) -> float:
    """The result's place in the seeded draw, uniform in [0, 1): a hash of the seed and the id alone —
    the id without its run's part (``RUN.s00017.r0000`` → ``s00017.r0000``), so that two runs of the
    same input, a crashed-and-resumed one and an uninterrupted one, draw the same results."""
    digest = hashlib.blake2b(f"{seed}:{result_id.partition('.')[2] or result_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def sample_for_verification(
    results: Sequence[ResultItem], *, fraction: float, minimum: int, seed: int, maximum: int | None = None
) -> list[ResultItem]:
    """A seeded random sample of :func:`sample_size` results, in id order.

    The sample is the results with the smallest :func:`sample_key` (a bottom-k draw): a uniform
    random subset of that size, which depends only on the seed and the ids — not on the order the
    results arrived in — and whose members can be told apart before the last result is in (a result
    whose key is above the cut of the results seen so far can only stay out).
    """
    k = sample_size(len(results), fraction=fraction, minimum=minimum, maximum=maximum)
    drawn = sorted(results, key=lambda r: (sample_key(seed, r.id), r.id))[:k]
    return sorted(drawn, key=lambda r: r.id)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion; (0, 1) when there is no observation."""
    if n == 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True, slots=True)
class VerificationReport:
    sampled: int
    verdicts: dict[str, Verdict]  # by result id; sampled results without one were not verified
    threshold: float
    confidence: float
    skipped: dict[str, str] = field(default_factory=dict)  # result id -> why it was not judged

    def _count(self, kind: VerdictKind) -> int:
        return sum(v.verdict == kind for v in self.verdicts.values())

    @property
    def confirmed(self) -> int:
        return self._count(VerdictKind.CONFIRM)

    @property
    def refuted(self) -> int:
        return self._count(VerdictKind.REFUTE)

    @property
    def unsure(self) -> int:
        return self._count(VerdictKind.UNSURE)

    @property
    def agreement(self) -> float | None:
        decisive = self.confirmed + self.refuted
        return self.confirmed / decisive if decisive else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.confirmed, self.confirmed + self.refuted, self.confidence)

    @property
    def alarm(self) -> bool:
        if self.sampled == 0:
            return False
        agreement = self.agreement
        return agreement is None or agreement < self.threshold

    @property
    def needs_review(self) -> bool:
        return self.alarm

    def alarm_event(self) -> dict[str, Any] | None:
        """Data of the ``alarm`` event for the run stream, or None when agreement is fine."""
        if not self.alarm:
            return None
        agreement = self.agreement
        if agreement is None:
            message = f"verification gave no decisive verdict on {self.sampled} sampled results"
        else:
            lo, hi = self.interval
            message = (
                f"verifier agreement {agreement:.1%} (CI {lo:.1%}-{hi:.1%}) is below the threshold "
                f"{self.threshold:.0%}; the output needs review"
            )
        return {"kind": "verification_agreement", "message": message, **self.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.interval
        agreement = self.agreement
        return {
            "sampled": self.sampled,
            "judged": len(self.verdicts),
            "confirmed": self.confirmed,
            "refuted": self.refuted,
            "unsure": self.unsure,
            "not_verified": len(self.skipped),
            "agreement": None if agreement is None else round(agreement, 4),
            "agreement_ci": [round(lo, 4), round(hi, 4)],
            "confidence": self.confidence,
            "threshold": self.threshold,
            "alarm": self.alarm,
            "needs_review": self.needs_review,
        }

    def annotate(self, results: Sequence[ResultItem]) -> list[ResultItem]:
        """Copies of the results with ``extra["verification"]`` set on the sampled ones."""
        out = []
        for r in results:
            if r.id in self.verdicts:
                out.append(replace(r, extra={**r.extra, "verification": self.verdicts[r.id].to_dict()}))
            elif r.id in self.skipped:
                status = {"status": "not_verified", "reason": self.skipped[r.id], "verifier": ""}
                out.append(replace(r, extra={**r.extra, "verification": status}))
            else:
                out.append(r)
        return out


class Judging:
    """Verdicts gathered one result at a time, and why the others were not judged.

    A :class:`~agent_fleet.errors.BudgetExhausted` stops further judging (every result asked about
    afterwards stays unverified with its reason); any other engine error leaves that one result
    unverified with the error's message.
    """

    def __init__(self, verifier: Verifier, partition_items: Callable[[ResultItem], Sequence[str]]) -> None:
        self._verifier = verifier
        self._partition_items = partition_items
        self.verdicts: dict[str, Verdict] = {}
        self.skipped: dict[str, str] = {}
        self.stopped: str | None = None

    async def judge(self, result: ResultItem) -> None:
        if self.stopped is not None:
            self.skipped[result.id] = self.stopped
            return
        try:
            self.verdicts[result.id] = await self._verifier.judge(result, self._partition_items(result))
        except BudgetExhausted as exc:
            self.stopped = self.stopped or f"verifier budget exhausted: {exc}"
            self.skipped[result.id] = self.stopped
        except FleetError as exc:
            self.skipped[result.id] = f"verifier error: {exc}"

    def report(self, sample: Sequence[ResultItem], config: VerificationConfig) -> VerificationReport:
        """The report of ``sample``: its verdicts, and why its other members were not judged."""
        return VerificationReport(
            sampled=len(sample),
            verdicts={r.id: self.verdicts[r.id] for r in sample if r.id in self.verdicts},
            threshold=config.threshold,
            confidence=config.confidence,
            skipped={r.id: self.skipped[r.id] for r in sample if r.id in self.skipped},
        )


async def verify_results(
    results: Sequence[ResultItem],
    verifier: Verifier,
    partition_items: Callable[[ResultItem], Sequence[str]],
    *,
    config: VerificationConfig | None = None,
) -> VerificationReport:
    """Sample, judge concurrently (bounded by ``config.concurrency``), and report (see :class:`Judging`)."""
    cfg = config or VerificationConfig()
    sample = sample_for_verification(
        results, fraction=cfg.fraction, minimum=cfg.minimum, seed=cfg.seed, maximum=cfg.maximum
    )
    judging = Judging(verifier, partition_items)
    gate = asyncio.Semaphore(max(1, cfg.concurrency))

    async def one(result: ResultItem) -> None:
        async with gate:
            await judging.judge(result)

    async with asyncio.TaskGroup() as tg:
        for r in sample:
            tg.create_task(one(r))
    return judging.report(sample, cfg)


SUBMIT_VERDICT = ToolSpec(
    name="submit_verdict",
    description="Submit your judgement of the result: confirm, refute or unsure, with a one-sentence reason.",
    parameters={
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["confirm", "refute", "unsure"]},
            "reason": {"type": "string"},
        },
        "required": ["verdict", "reason"],
    },
)

_SYSTEM = (
    "You are an independent verifier. Another agent reported the result below about the input it was "
    "given. Judge only from the input shown whether the result is correct and supported. Call "
    "submit_verdict exactly once: confirm if it is supported, refute if the input contradicts it or "
    "does not contain what it claims, unsure if the input shown is not enough to tell."
)


class ModelVerifier:
    """One model call per result through the gateway, under the session id ``session_for(result)``."""

    def __init__(
        self,
        gateway: ModelGateway,
        *,
        model: str,
        session_for: Callable[[ResultItem], str],
        max_tokens: int = 512,
        max_input_chars: int = 24_000,
        shape: CallShape | None = None,
    ) -> None:
        """``shape``: what the user set for this model's calls; it wins over the defaults here (an output
        limit of ``max_tokens``, temperature 0)."""
        self._gateway = gateway
        self._model = model
        self._session_for = session_for
        self._shape = (shape or CallShape()).over(CallShape(max_tokens=max_tokens, temperature=0.0))
        self._max_input_chars = max_input_chars

    def request(self, result: ResultItem, partition_items: Sequence[str]) -> ChatRequest:
        shown: list[str] = []
        used = 0
        for item in partition_items:
            if used + len(item) > self._max_input_chars:
                shown.append(f"[… {len(partition_items) - len(shown)} more items not shown]")
                break
            shown.append(item)
            used += len(item)
        lines = [
            "Input of the partition:",
            *shown,
            "",
            "Result to judge:",
            f"Title: {result.title}",
            f"Location: {result.location or '-'}",
            f"Category: {result.category or '-'}",
            f"Body: {result.body}",
        ]
        return ChatRequest(
            model=self._model,
            messages=[{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n".join(lines)}],
            tools=(SUBMIT_VERDICT,),
            max_tokens=self._shape.max_tokens or 512,
            temperature=self._shape.temperature,
            seed=self._shape.seed,
            tool_choice=self._shape.tool_choice,
        )

    async def judge(self, result: ResultItem, partition_items: Sequence[str]) -> Verdict:
        response = await self._gateway.complete(self._session_for(result), self.request(result, partition_items))
        for call in response.tool_calls:
            if call.name != SUBMIT_VERDICT.name:
                continue
            try:
                args = json.loads(call.arguments or "{}")
                kind = VerdictKind(str(args.get("verdict", "")).strip().lower())
            except (ValueError, AttributeError):
                return Verdict(VerdictKind.UNSURE, "the verifier's verdict could not be read", self._model)
            return Verdict(kind, str(args.get("reason", "")).strip(), response.model or self._model)
        return Verdict(VerdictKind.UNSURE, "the verifier gave no verdict", response.model or self._model)
