"""Cross-fleet verification of a run's results, wired to the engine's gateway and session log.

The sample is :func:`~agent_fleet.aggregate.verify.sample_for_verification`'s: the unique results
with the smallest seeded keys — a uniform random sample of the run's *final* unique results, its
size from their final number. A run does not wait for its last result to start on it: while the
last sessions still run, the results that opened a cluster of their own (live deduplication says
which) and whose key is below the cut projected for the final number are judged ahead, smallest key
first, in gateway capacity the run's own sessions will not ask for (:meth:`RunVerification.room`).
Once the final unique results are known only the sample's members not judged yet are judged; a
verdict of a result that is not in the sample after all (the projection was off, or the result
merged into another in the final pass) stays out of the report, its call counted all the same.

Each verifier call runs under its own session id ``RUN.vNNNN``, so the gateway meters and budgets
it like any agent session. The verifier judges a result as its agent recorded it. The outcome is
recorded in the run's stream (``verification``, and an ``alarm`` when agreement drops below the
threshold), so the summary still equals the log; verdicts recorded earlier (a run aggregated again
on resume) are reused by result id instead of paid for twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from agent_fleet.aggregate.verify import (
    Judging,
    ModelVerifier,
    Verdict,
    VerdictKind,
    VerificationConfig,
    VerificationReport,
    sample_for_verification,
    sample_key,
    sample_size,
)
from agent_fleet.clock import Clock, timeout
from agent_fleet.config import FleetConfig
from agent_fleet.domain.decode import decode
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.ledger import Tally
from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.payloads import Verification
from agent_fleet.domain.plan import InputKind, Plan
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.options import RunOptions, call_shape
from agent_fleet.session.port import SessionLog
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.meter import MeterWindow

__all__ = ["RunVerification", "VerificationOutcome"]

_MAX_FILE_CHARS = 12_000


@dataclass(frozen=True, slots=True)
class VerificationOutcome:
    results: list[ResultItem]  # the unique results, the sampled ones annotated
    summary: dict[str, Any]  # report figures, verifier model, calls, tokens and cost


class _Metered:
    """The gateway, with what the verifier calls cost read from its meter (for the log and the summary)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._window = MeterWindow(gateway.meter)

    @property
    def usage(self) -> Usage:
        return self._window.spent().usage

    @property
    def cost(self) -> Decimal:
        return self._window.spent().cost

    @property
    def calls(self) -> int:
        return self._window.spent().calls

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        self._window.watch(session_id)
        return await self._gateway.complete(session_id, request)

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


def _partition_inputs(plan: Plan) -> Callable[[ResultItem], Sequence[str]]:
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


def _earlier(run_events: Sequence[Event]) -> tuple[dict[str, Verdict], dict[str, Any] | None, dict[str, Any]]:
    """From the run's ``verification`` events: every verdict recorded (by result id), the last
    report recorded, and what all of them cost together."""
    verdicts: dict[str, Verdict] = {}
    report: dict[str, Any] | None = None
    spent = Tally()
    for ev in run_events:
        p = decode(ev)
        if not isinstance(p, Verification):
            continue
        for rid, v in p.verdicts.items():
            verdicts[rid] = Verdict(VerdictKind(v["status"]), v["reason"], v["verifier"])
        report = dict(p.report) if p.report else report
        spent.add(p.spent.usage, p.spent.cost_usd, p.spent.calls)
    return verdicts, report, {"usage": spent.usage, "cost": spent.cost_usd, "calls": spent.calls}


class RunVerification:
    """The verification of one run: judged ahead while it runs (:meth:`run`, a task of the run's
    TaskGroup), settled on the final unique results (:meth:`finish`) or abandoned (:meth:`abandon`)."""

    POLL = 0.02  # seconds between two looks at the gateway's free capacity

    def __init__(
        self,
        *,
        gateway: Gateway,
        log: SessionLog,
        run_id: str,
        plan: Plan,
        config: FleetConfig,
        run_model: str,
        clock: Clock,
        run_events: Sequence[Event] = (),
        options: RunOptions | None = None,
    ) -> None:
        s = config.verification
        self.config = VerificationConfig(
            fraction=s.fraction, minimum=s.minimum, maximum=s.maximum, seed=s.seed, threshold=s.threshold
        )
        self.model = _verifier_model(config, run_model)
        self._gateway, self._log, self._run_id, self._clock = gateway, log, run_id, clock
        self._metered = _Metered(gateway)
        numbers: dict[str, int] = {}

        def session_for(result: ResultItem) -> str:
            return f"{run_id}.v{numbers.setdefault(result.id, len(numbers)):04d}"

        # what the run sends on the verifier model's calls (its flags over fleet.yaml's entry)
        shape = call_shape(options, config, self.model) if options is not None else None
        verifier = ModelVerifier(self._metered, model=self.model, session_for=session_for, shape=shape)
        self._judging = Judging(verifier, _partition_inputs(plan))
        self._reused, self._last_report, self._spent_before = _earlier(run_events)
        self._items: dict[str, ResultItem] = {}  # every result offered (as recorded), by id
        self._candidates: list[tuple[float, str]] = []  # (sample key, id), smallest first
        self._keys: list[float] = []  # the sample key of every result offered
        self._cut: tuple[tuple[int, int], float] = ((0, 0), -1.0)  # (offered, rank) → key, the last cut
        self._in_flight: set[str] = set()
        self._sample: list[ResultItem] | None = None  # once the final unique results are known
        self._closed = False  # no call is started any more (shutdown, or a run that will not report)
        self._wake = asyncio.Event()
        self._running = False
        self.done = asyncio.Event()  # run() has returned: nothing is judged any more
        self.idle = asyncio.Event()  # no verifier call in flight
        self.idle.set()
        self.demand: Callable[[], int] = lambda: 0  # slots the run's own sessions may still ask for
        self.progress: Callable[[], float] = lambda: 1.0  # share of the run's sessions that ended
        self.pending: Callable[[], int] = lambda: 0  # results recorded and not offered yet
        self.ahead: Callable[[], bool] = lambda: True  # whether the run is far enough to judge ahead

    @classmethod
    def wanted(cls, config: FleetConfig) -> bool:
        """fleet.yaml asks for verification (``fraction: 0`` with ``minimum: 0`` turns it off)."""
        return not (config.verification.fraction == 0 and config.verification.minimum == 0)

    # -- ahead of the final results -------------------------------------------------------------
    def offer(self, results: Iterable[ResultItem]) -> None:
        """Results that are unique so far (as they were recorded): candidates to judge ahead."""
        seed = self.config.seed
        for r in results:
            if r.id not in self._items:
                self._items[r.id] = r
                key = sample_key(seed, r.id)
                self._keys.append(key)
                heapq.heappush(self._candidates, (key, r.id))
        self._wake.set()

    def cut(self) -> float:
        """Judged ahead: the results whose key is at most this. The final number of unique results is
        projected from those offered (and those heard but not clustered yet) and the share of the
        run's sessions that ended; the cut is the key of the offered result at which the sample's
        share of them ends — an order statistic, exact once every result is in (the share ``k / n``
        itself misses the sample's last key by about ``sqrt(k) / n``). Until then it is drawn three
        standard deviations short: from a share ``f`` of the results, that quantile's relative error is
        ``sqrt((1 - f) / (k f))``. A result judged ahead then lies outside the final sample only when
        the final pass merges it away or the draw is three deviations off, so an uninterrupted run and
        a crashed-and-resumed one pay for the same verifier calls; the sample's remainder is judged
        at the end, in one round of calls."""
        progress = min(1.0, self.progress())
        offered = len(self._keys)
        if progress <= 0.0 or not offered:
            return -1.0
        n = (offered + self.pending()) / progress
        c = self.config
        k = sample_size(math.ceil(n), fraction=c.fraction, minimum=c.minimum, maximum=c.maximum)
        f = min(1.0, offered / n)
        m = min(offered, math.floor(k * f * (1.0 - 3.0 * math.sqrt((1.0 - f) / (k * f)))))
        if m <= 0:
            return -1.0
        if self._cut[0] != (offered, m):
            self._cut = ((offered, m), heapq.nsmallest(m, self._keys)[-1])
        return self._cut[1]

    def room(self) -> int:
        """Calls that may start now: in gateway capacity nobody waits for and the run's own sessions
        will not ask for (each session has one call at a time), so verification never holds up the
        run. Ahead of the final results only while the run says it may be (``ahead``); once the
        sample is known, at least ``concurrency`` in flight as well, in turn with every other call."""
        stats = self._gateway.limiter.statistics()
        total = stats.total_tokens if stats.total_tokens is not None else self.config.concurrency
        free = stats.available_tokens if stats.available_tokens is not None else total
        flying = len(self._in_flight)
        spare = 0 if stats.tasks_waiting else min(free, total - self.demand() - flying)
        if self._sample is None:
            return max(0, spare) if self.ahead() else 0
        return max(0, spare, self.config.concurrency - flying)

    def _due(self, room: int) -> list[ResultItem]:
        """The next results to judge, smallest key first: the sample's once it is known, else the
        candidates below the cut."""
        if self._closed or room <= 0:
            return []
        if self._sample is not None:
            todo = [r for r in self._sample if self._open(r.id)]
            return [self._items.get(r.id, r) for r in todo[:room]]
        due: list[ResultItem] = []
        cut = self.cut()
        while self._candidates and len(due) < room and self._candidates[0][0] <= cut:
            _, rid = heapq.heappop(self._candidates)
            if self._open(rid):
                due.append(self._items[rid])
        return due

    def _open(self, rid: str) -> bool:
        j = self._judging
        return rid not in j.verdicts and rid not in j.skipped and rid not in self._in_flight and rid not in self._reused

    def _settled(self) -> bool:
        if self._in_flight:
            return False
        if self._closed:
            return True
        return self._sample is not None and not any(self._open(r.id) for r in self._sample)

    async def run(self) -> None:
        """Judge what is due until the sample is judged (or verification is abandoned)."""
        self._running = True
        try:
            async with asyncio.TaskGroup() as tg:
                while not self._settled():
                    for result in self._due(self.room()):
                        self._in_flight.add(result.id)
                        self.idle.clear()
                        tg.create_task(self._judge(result))
                    await self._rest()
        finally:
            self._running = False
            self.done.set()

    async def _judge(self, result: ResultItem) -> None:
        try:
            await self._judging.judge(result)
        finally:
            self._in_flight.discard(result.id)
            if not self._in_flight:
                self.idle.set()
            self._wake.set()

    async def _rest(self) -> None:
        if not self._wake.is_set():
            with contextlib.suppress(TimeoutError):
                async with timeout(self._clock, self.POLL):
                    await self._wake.wait()
        self._wake.clear()

    async def _until_done(self) -> None:
        if self._running:
            await self.done.wait()
        elif not self.done.is_set():
            await self.run()

    # -- the end --------------------------------------------------------------------------------
    def close(self) -> None:
        """Start no call any more (those in flight finish). Safe to call twice."""
        self._closed = True
        self._wake.set()

    async def abandon(self) -> None:
        """The run ends without a report to verify (paused, interrupted, failed): what was judged
        ahead is recorded (it was paid for), nothing more is judged."""
        self.close()
        await self._until_done()
        if self._metered.calls:
            await self._record(None)

    async def finish(
        self, unique: Sequence[ResultItem], recorded: Callable[[str], ResultItem | None]
    ) -> VerificationOutcome:
        """Judge the sample of the final ``unique`` results (``recorded``: a result as its agent
        recorded it, by id) and record the outcome."""
        sample = sample_for_verification(
            unique, fraction=self.config.fraction, minimum=self.config.minimum, seed=self.config.seed,
            maximum=self.config.maximum,
        )  # fmt: skip
        for r in sample:
            if r.id not in self._items:
                self._items[r.id] = recorded(r.id) or r
        self._sample = sample
        self._wake.set()
        await self._until_done()
        judging = self._judging
        for r in sample:  # verdicts paid for earlier count as judged now
            if r.id in self._reused and r.id not in judging.verdicts:
                judging.verdicts[r.id] = self._reused[r.id]
        report = judging.report(sample, self.config)
        if self._metered.calls or report.to_dict() != self._last_report:
            await self._record(report)
        spent = self._spent_before
        usage, cost = spent["usage"] + self._metered.usage, spent["cost"] + self._metered.cost
        summary = {
            **report.to_dict(),
            "model": self.model,
            "calls": spent["calls"] + self._metered.calls,
            "tokens": usage.total_tokens,
            "cost_usd": float(cost),
        }
        return VerificationOutcome(await asyncio.to_thread(report.annotate, unique), summary)

    async def _record(self, report: VerificationReport | None) -> None:
        """The ``verification`` event (what this engine spent on it; the sample's verdicts, or what
        was judged ahead when there is no report), with an ``alarm`` when agreement is too low."""
        judging, m = self._judging, self._metered
        verdicts = report.verdicts if report is not None else judging.verdicts
        data = {
            "report": report.to_dict() if report is not None else None,
            "verdicts": {k: v.to_dict() for k, v in verdicts.items()},
            "skipped": report.skipped if report is not None else {},
            "model": self.model,
            "calls": m.calls,
            "usage": m.usage.to_dict(),
            "cost_usd": str(m.cost),
            "outside_sample": len(set(judging.verdicts) - set(verdicts)),
        }
        events: list[tuple[str, dict[str, Any]]] = [(EventType.VERIFICATION, data)]
        alarm = report.alarm_event() if report is not None else None
        if alarm is not None:
            events.append((EventType.ALARM, alarm))
        await self._log.emit_events(self._run_id, events)
