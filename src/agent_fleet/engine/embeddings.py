"""Provider embeddings per run, as the meter counts them: what the aggregator's embeddings cost, so
the run's log can record it (the summary equals the log)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_fleet.domain.model import EmbeddingResult
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.meter import MeterWindow

__all__ = ["MeteredEmbeddings"]


class MeteredEmbeddings:
    """The gateway's embeddings; what they cost is read from the gateway's meter (a
    :class:`~agent_fleet.spend.meter.MeterWindow` over the sessions they are charged to)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._window = MeterWindow(gateway.meter)
        self.model = ""

    async def embed(
        self, session_id: str, texts: Sequence[str], *, model: str, dimensions: int | None = None
    ) -> EmbeddingResult:
        self._window.watch(session_id)
        result = await self._gateway.embed(session_id, texts, model=model, dimensions=dimensions)
        self.model = result.model or model
        return result

    def take(self) -> dict[str, Any] | None:
        """What the meter charged since the last take, as ``embeddings`` event data (None when nothing)."""
        spent = self._window.take()
        if not spent.calls:
            return None
        return {"calls": spent.calls, "usage": spent.usage.to_dict(), "cost_usd": str(spent.cost), "model": self.model}
