"""Deduplication while a run is still going: results are clustered as they are recorded.

The session log tells :class:`LiveDedup` about every durable ``result_item``; it feeds them to the
aggregator in batches (embedding happens off the event loop) and keeps a provisional dedup rate
that ``agent-fleet status`` shows. The aggregator's embedding cache lives in the run's output
directory, so a resumed run does not embed again what was embedded before the crash.

Live figures are a view, and the sessions come first: after each batch the consumer rests in
proportion to the time the batch took (:class:`DedupPacing`). When the rest of the engine is
using the CPU (many fast calls), deduplication takes a small share and falls behind; when the
engine waits on the provider (the usual case), it takes a large share and keeps up. What is not
clustered when the sessions end is left to the final pass, which clusters every result anyway.

``on_unique`` hears each batch's results that opened a cluster of their own (provisionally unique):
the run's verification picks the results it may judge ahead among them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_fleet.aggregate.aggregator import Aggregator, DecisionKind
from agent_fleet.clock import Clock, RealClock
from agent_fleet.domain.decode import decode_as
from agent_fleet.domain.events import Event
from agent_fleet.domain.payloads import ResultRecorded
from agent_fleet.domain.results import ResultItem

__all__ = ["DedupPacing", "LiveDedup", "snapshot_key"]

_log = logging.getLogger(__name__)


def snapshot_key(run_id: str) -> str:
    return f"dedup:{run_id}"


@dataclass(frozen=True)
class DedupPacing:
    """How much of the engine's time live deduplication may take.

    ``busy_share`` applies when the rest of the process used more than ``busy_above`` of one core
    since the last batch (the sessions need the CPU), ``idle_share`` otherwise. A batch holds at
    most ``max_batch`` results, so one batch never keeps the engine busy for long.
    """

    idle_share: float = 0.5
    busy_share: float = 0.05
    busy_above: float = 0.5
    max_batch: int = 512

    def __post_init__(self) -> None:
        for name in ("idle_share", "busy_share"):
            share = getattr(self, name)
            if not 0.0 < share <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {share}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {self.max_batch}")

    def share(self, engine_cpu_share: float) -> float:
        return self.busy_share if engine_cpu_share > self.busy_above else self.idle_share

    def rest_after(self, spent: float, engine_cpu_share: float) -> float:
        """Seconds to rest after a batch that took ``spent`` seconds, so that the batches take
        ``share`` of the time."""
        share = self.share(engine_cpu_share)
        return max(0.0, spent) * (1.0 - share) / share


class LiveDedup:
    def __init__(
        self,
        aggregator: Aggregator,
        *,
        pacing: DedupPacing | None = None,
        clock: Clock | None = None,
        cpu_time: Callable[[], float] = time.process_time,
        on_unique: Callable[[list[ResultItem]], None] | None = None,
    ) -> None:
        self.aggregator = aggregator
        self.on_unique = on_unique
        self.pacing = pacing or DedupPacing()
        self._clock = clock or RealClock()
        self._cpu_time = cpu_time
        self._pending: list[ResultItem] = []
        self._batch = 0  # results of the batch being clustered
        self._ready = asyncio.Event()  # results are pending, or the run has finished
        self._finished = asyncio.Event()

    def heard(self, events: Sequence[Event]) -> None:
        found = [decode_as(e, ResultRecorded) for e in events]
        self.feed([r.item() for r in found if r is not None])

    def feed(self, items: list[ResultItem]) -> None:
        if items:
            self._pending.extend(items)
            self._ready.set()

    @property
    def backlog(self) -> int:
        """Results heard and waiting for a batch."""
        return len(self._pending)

    @property
    def unclustered(self) -> int:
        """Results heard and not clustered yet: the backlog and the batch being clustered."""
        return len(self._pending) + self._batch

    def finish(self) -> None:
        """No more results: ``consume`` returns; what it has not clustered is left to the final pass."""
        self._finished.set()
        self._ready.set()

    async def consume(self) -> None:
        pacing = self.pacing
        mark_wall, mark_cpu = self._clock.now(), self._cpu_time()
        while True:
            await self._ready.wait()
            if self._finished.is_set():
                return
            batch = self._pending[: pacing.max_batch]
            del self._pending[: pacing.max_batch]
            if not self._pending:
                self._ready.clear()
            start_wall, start_cpu = self._clock.now(), self._cpu_time()
            window = start_wall - mark_wall
            # what the rest of the engine used while deduplication was not running
            engine_share = (start_cpu - mark_cpu) / window if window > 0 else 0.0
            self._batch = len(batch)
            try:
                await self._add(batch)
            except Exception:  # live figures are a view: the final pass recomputes everything
                _log.exception("live deduplication failed for a batch; the final pass will redo it")
            finally:
                self._batch = 0
            mark_wall, mark_cpu = self._clock.now(), self._cpu_time()
            await self._rest(pacing.rest_after(mark_wall - start_wall, engine_share))

    async def _add(self, batch: list[ResultItem]) -> None:
        decisions = await self.aggregator.add_many(batch)
        if self.on_unique is not None:
            self.on_unique([it for it, d in zip(batch, decisions, strict=True) if d.kind is DecisionKind.NEW])

    async def drain(self) -> None:
        """Once :meth:`consume` has returned: hand what was heard and not clustered yet to the run's
        final pass (``Aggregator.extend``: no streaming decision that the pass would redo at once, and
        only the texts it compares are embedded); none of it is offered as unique."""
        pending, self._pending = self._pending, []
        if pending:
            await self.aggregator.extend(pending)

    async def _rest(self, seconds: float) -> None:
        if seconds <= 0.0 or self._finished.is_set():
            return
        nap = asyncio.ensure_future(self._clock.sleep(seconds))
        stop = asyncio.ensure_future(self._finished.wait())
        try:
            await asyncio.wait((nap, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (nap, stop):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def stats(self) -> dict[str, Any]:
        return self.aggregator.stats().to_dict()
