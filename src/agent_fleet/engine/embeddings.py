"""Provider embeddings metered per run: what the aggregator's embeddings cost, so the run's log can
record it (the summary equals the log)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from agent_fleet.domain.model import EmbeddingResult
from agent_fleet.domain.usage import Usage
from agent_fleet.spend.gateway import Gateway

__all__ = ["MeteredEmbeddings"]


class MeteredEmbeddings:
    """The gateway's embeddings, adding up what they cost so the run's log can record it."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self.usage = Usage()
        self.cost = Decimal(0)
        self.calls = 0

    async def embed(
        self, session_id: str, texts: Sequence[str], *, model: str, dimensions: int | None = None
    ) -> EmbeddingResult:
        result = await self._gateway.embed(session_id, texts, model=model, dimensions=dimensions)
        self.usage = self.usage + result.usage
        self.cost += result.cost_usd
        self.calls += 1
        return result

    def take(self) -> dict[str, Any] | None:
        """What was spent since the last take, as ``embeddings`` event data (None when nothing)."""
        if not self.calls:
            return None
        data = {"calls": self.calls, "usage": self.usage.to_dict(), "cost_usd": str(self.cost)}
        self.usage, self.cost, self.calls = Usage(), Decimal(0), 0
        return data
