"""``run_command``: a shell in the session's sandbox, provisioned on first use.

A session that never runs a command never gets a sandbox. A command killed mid-call (the sandbox
process died, OOM, a signal) comes back as a tool error the model can retry; a sandbox whose
workspace vanished is replaced on the next call.
"""

from __future__ import annotations

from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.hands.port import ToolOutput
from agent_fleet.hands.sandbox import LazySandbox, SandboxError

__all__ = ["RUN_COMMAND", "SandboxHands"]

RUN_COMMAND = ToolSpec(
    "run_command",
    "Run a shell command in your own sandbox (working directory: your workspace; no network unless "
    "granted). Returns stdout, stderr and how it ended.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "number", "description": "seconds (capped by the fleet)"},
        },
        "required": ["command"],
    },
)


class SandboxHands:
    def __init__(self, sandbox: LazySandbox, *, max_timeout: float = 300.0) -> None:
        self._sandbox = sandbox
        self._max_timeout = max_timeout

    def specs(self) -> tuple[ToolSpec, ...]:
        return (RUN_COMMAND,)

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        if name != "run_command":
            return ToolOutput(f"error: unknown tool {name!r}", is_error=True)
        command = input.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolOutput("error: run_command needs a non-empty string 'command'", is_error=True)
        timeout = input.get("timeout")
        wall = self._max_timeout
        if isinstance(timeout, int | float) and timeout > 0:
            wall = min(float(timeout), self._max_timeout)
        try:
            box = await self._sandbox.get()
            run = await box.run(command, timeout=wall)
        except SandboxError as exc:
            await self._sandbox.discard()
            return ToolOutput(f"error: the sandbox is gone ({exc}); a new one is made on the next call, retry", True)
        return ToolOutput(run.describe(), is_error=not run.ok)

    async def aclose(self) -> None:
        await self._sandbox.aclose()
