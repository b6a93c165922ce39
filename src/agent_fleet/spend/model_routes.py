"""Which provider and model serve what a client asks for.

In order:

1. a model the gateway routes — a fleet.yaml ``models:`` ``name`` (served as that entry's model id) or
   a model id one of them serves — goes to that provider;
2. else the alias table (fleet.yaml ``aliases:``, ``agent-fleet gateway --alias``): an exact name,
   then the fnmatch patterns in the order given (``claude-haiku-*``, ``*``); the target is a ``models:``
   name or a model id (served by the default provider when no entry serves it);
3. else the default provider, with the model exactly as asked — the provider says whether it has it.

A :class:`Target` whose model differs from what was asked is a substitution: the gateway service
records it as a ``route`` event and clamps the client's output limit to the target's. Nothing is
substituted any other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from agent_fleet.spend.port import ModelProvider

if TYPE_CHECKING:
    from agent_fleet.spend.gateway import Gateway

__all__ = ["ModelRoutes", "Target"]


@dataclass(frozen=True, slots=True)
class Target:
    provider: ModelProvider
    model: str
    asked: str
    via: str | None = None  # how the model was chosen when it is not what was asked

    @property
    def substituted(self) -> bool:
        return self.model != self.asked

    @property
    def routed(self) -> bool:
        """Did configuration choose this provider (rather than the default taking the name as it came)?"""
        return self.via is not None

    def to_event(self) -> dict[str, str]:
        return {"model": self.model, "name": self.asked, "tier": "", "reason": f"asked for {self.asked}: {self.via}"}


class ModelRoutes:
    def __init__(self, gateway: Gateway, aliases: Mapping[str, str] | None = None) -> None:
        self._gw = gateway
        self.aliases: dict[str, str] = dict(aliases or {})

    def resolve(self, asked: str) -> Target:
        gw = self._gw
        if asked in gw.routes:
            model = gw.aliases.get(asked, asked)
            return Target(gw.routes[asked], model, asked, "route" if model != asked else "model")
        target = self._alias(asked)
        if target is not None:
            pattern, name = target
            model = gw.aliases.get(name, name)
            return Target(gw.routes.get(name, gw.provider), model, asked, f"alias {pattern} -> {name}")
        if not asked:
            return Target(gw.provider, str(getattr(gw.provider, "model", "")), asked, "the default model")
        return Target(gw.provider, asked, asked)

    def _alias(self, asked: str) -> tuple[str, str] | None:
        exact = self.aliases.get(asked)
        if exact is not None:
            return asked, exact
        for pattern, name in self.aliases.items():
            if any(c in pattern for c in "*?[") and fnmatchcase(asked, pattern):
                return pattern, name
        return None

    def __repr__(self) -> str:
        return f"<ModelRoutes routes={len(self._gw.routes)} aliases={len(self.aliases)}>"
