"""The ports the spend plane offers to the rest of the engine.

Every model call of the fleet passes one :class:`ModelGateway`. A ``ModelProvider`` is the
bottom of the wrapper stack (budget → limiter → retry/breaker → meter → provider): it speaks one
wire format over HTTP and knows nothing of budgets.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from agent_fleet.domain.model import ChatRequest, ChatResponse
from agent_fleet.domain.usage import Usage

__all__ = ["ModelGateway", "ModelProvider"]


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
