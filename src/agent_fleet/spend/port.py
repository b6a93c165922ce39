"""The ports the spend plane offers to the rest of the engine.

Every model call of the fleet passes one :class:`ModelGateway`. A ``ModelProvider`` is the
bottom of the wrapper stack (budget → limiter → retry/breaker → meter → provider): it speaks one
wire format over HTTP and knows nothing of budgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Protocol, runtime_checkable

from agent_fleet.domain.model import ChatRequest, ChatResponse, EmbeddingResult
from agent_fleet.domain.usage import Usage

__all__ = ["EmbeddingGateway", "EmbeddingProvider", "ModelGateway", "ModelProvider"]


class ModelProvider(Protocol):
    """One provider endpoint and wire format. Raises ProviderError subclasses or ProviderUnreachable."""

    name: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


class ModelGateway(Protocol):
    """The single entrance for model calls.

    ``complete`` raises :class:`~agent_fleet.errors.BudgetExhausted` *before* sending when a budget
    would be crossed; the caller pauses the session. A call already in flight always finishes
    and is charged.
    """

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse: ...

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        """Tell the gateway what a session had already spent (replayed from its log on resume)."""

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        """What a call of unknown fate is charged: its reservation (prompt estimate + its output limit)."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    """A provider with an embeddings endpoint. ``max_embedding_batch`` is how many inputs one request
    may carry; 0 means the provider has no embeddings endpoint (its ``embed`` raises ConfigError)."""

    name: str
    max_embedding_batch: int

    async def embed(
        self, texts: Sequence[str], model: str, *, dimensions: int | None = None
    ) -> tuple[list[list[float]], Usage]: ...


class EmbeddingGateway(Protocol):
    """Embeddings through the gateway, metered and budgeted like chat calls.

    Kept apart from :class:`ModelGateway` so the wrappers that only forward chat calls (an
    attempt's view of the gateway, say) need not grow an ``embed``. ``embed`` raises
    :class:`~agent_fleet.errors.BudgetExhausted` before sending when a cap would be crossed.
    """

    async def embed(
        self, session_id: str, texts: Sequence[str], *, model: str, dimensions: int | None = None
    ) -> EmbeddingResult: ...
