"""Deduplication while a run is still going: results are clustered as they are recorded.

The session log tells :class:`LiveDedup` about every durable ``result_item``; it feeds them to the
aggregator in batches (embedding happens off the event loop) and keeps a provisional dedup rate
that ``agent-fleet status`` shows. The aggregator's embedding cache lives in the run's output
directory, so a resumed run does not embed again what was embedded before the crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from agent_fleet.aggregate import Aggregator
from agent_fleet.domain.events import Event, EventType
from agent_fleet.domain.results import ResultItem

__all__ = ["LiveDedup", "snapshot_key"]

_log = logging.getLogger(__name__)


def snapshot_key(run_id: str) -> str:
    return f"dedup:{run_id}"


class LiveDedup:
    def __init__(self, aggregator: Aggregator) -> None:
        self.aggregator = aggregator
        self._queue: asyncio.Queue[list[ResultItem] | None] = asyncio.Queue()

    def heard(self, events: Sequence[Event]) -> None:
        items = [ResultItem.from_dict(e.data) for e in events if e.type == EventType.RESULT_ITEM]
        if items:
            self._queue.put_nowait(items)

    def feed(self, items: list[ResultItem]) -> None:
        if items:
            self._queue.put_nowait(items)

    def finish(self) -> None:
        """No more results: ``consume`` drains what is queued and returns."""
        self._queue.put_nowait(None)

    async def consume(self) -> None:
        while True:
            batch = await self._queue.get()
            if batch is None:
                return
            while not self._queue.empty():  # take everything already waiting as one batch
                more = self._queue.get_nowait()
                if more is None:
                    self._queue.put_nowait(None)
                    break
                batch.extend(more)
            try:
                await self.aggregator.add_many(batch)
            except Exception:  # live figures are a view: the final pass recomputes everything
                _log.exception("live deduplication failed for a batch; the final pass will redo it")

    def stats(self) -> dict[str, Any]:
        return self.aggregator.stats().to_dict()
