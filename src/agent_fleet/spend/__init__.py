"""The spend plane: gateway, budgets, limiter, meter, routing, providers."""

from agent_fleet.spend.gateway import Gateway, GatewayStatistics, apply_budget_event
from agent_fleet.spend.port import ModelGateway, ModelProvider
from agent_fleet.spend.providers import build_provider, resolve_api_key, resolve_base_url

__all__ = [
    "Gateway",
    "GatewayStatistics",
    "ModelGateway",
    "ModelProvider",
    "apply_budget_event",
    "build_provider",
    "resolve_api_key",
    "resolve_base_url",
]
