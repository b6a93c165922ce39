"""The spend plane: gateway, budgets, limiter, meter, routing, providers."""

from agent_fleet.spend.port import ModelGateway, ModelProvider

__all__ = ["ModelGateway", "ModelProvider"]
