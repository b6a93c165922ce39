"""One session's hands made of several toolsets (files, shell, web, MCP), routed by tool name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.hands.port import ChangeSource, Hands, Replays, ToolOutput

__all__ = ["CompositeHands"]


class CompositeHands:
    """Invariant: tool names are unique across the parts; ``aclose`` closes every part once.
    ``changes``: the session's workspace, shared by the parts that use one (its change)."""

    def __init__(self, *parts: Hands, changes: ChangeSource | None = None) -> None:
        self._parts = parts
        self._changes = changes
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

    def replay(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        for part in self._parts:
            if isinstance(part, Replays):
                part.replay(calls)

    async def change(self) -> dict[str, Any] | None:
        return await self._changes.change() if self._changes is not None else None

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
