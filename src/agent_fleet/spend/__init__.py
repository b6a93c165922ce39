"""The spend plane: gateway, budgets, limiter, meter, routing, providers.

Other planes use :mod:`agent_fleet.spend.port`; the gateway and the providers are imported on first
use, so importing the port loads no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_fleet._lazy import lazy_exports
from agent_fleet.spend.port import EmbeddingGateway, EmbeddingProvider, ModelGateway, ModelProvider

if TYPE_CHECKING:
    from agent_fleet.spend.gateway import Gateway, GatewayStatistics, apply_budget_event
    from agent_fleet.spend.providers import build_provider, resolve_api_key, resolve_base_url

__all__ = [
    "EmbeddingGateway",
    "EmbeddingProvider",
    "Gateway",
    "GatewayStatistics",
    "ModelGateway",
    "ModelProvider",
    "apply_budget_event",
    "build_provider",
    "resolve_api_key",
    "resolve_base_url",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Gateway": "agent_fleet.spend.gateway",
        "GatewayStatistics": "agent_fleet.spend.gateway",
        "apply_budget_event": "agent_fleet.spend.gateway",
        "build_provider": "agent_fleet.spend.providers",
        "resolve_api_key": "agent_fleet.spend.providers",
        "resolve_base_url": "agent_fleet.spend.providers",
    },
)
