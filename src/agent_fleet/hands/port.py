"""The hands port: tools are called as ``execute(name, input) -> str``.

A tool error is returned to the model as text (``ToolOutput.is_error``), never raised into the
brain: the model decides whether to retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agent_fleet.domain.model import ToolSpec

__all__ = ["Hands", "ToolOutput"]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    output: str
    is_error: bool = False


class Hands(Protocol):
    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools this session may call (its partition's toolset), besides submit_result/finish."""

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput: ...

    async def aclose(self) -> None:
        """Release whatever was provisioned (sandbox processes, worktrees). Safe to call twice."""
