"""One session's hands made of several toolsets (files, shell, web, MCP), routed by tool name."""

from __future__ import annotations

from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.hands.port import Hands, ToolOutput

__all__ = ["CompositeHands"]


class CompositeHands:
    """Invariant: tool names are unique across the parts; ``aclose`` closes every part once."""

    def __init__(self, *parts: Hands) -> None:
        self._parts = parts
        self._route: dict[str, Hands] = {}
        for part in parts:
            for spec in part.specs():
                if spec.name in self._route:
                    raise ValueError(f"tool {spec.name!r} is offered twice")
                self._route[spec.name] = part
        self._closed = False

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(s for p in self._parts for s in p.specs())

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        part = self._route.get(name)
        if part is None:
            return ToolOutput(f"error: unknown tool {name!r}", is_error=True)
        return await part.execute(name, input)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for part in self._parts:
            try:
                await part.aclose()
            except Exception as exc:  # close the others before reporting
                errors.append(exc)
        if errors:
            raise errors[0]
