"""``run`` and ``run_command``: a shell in the session's sandbox, provisioned on first use.

``run(command)`` is what the built-in agent gets where the run makes changes (SPEC.md); ``run_command``
is the same tool under the name fleet.yaml ``hands.tools`` has always used. Both run the command
through ``/bin/sh -c`` with the workspace as working directory, return its output and how it ended
(exit code, timeout, signal), and are bounded in time: a command that outlives ``max_timeout`` (or the
``timeout`` it asked for, whichever is shorter) is killed with its whole process group.

A session that never runs a command never gets a sandbox. A command killed mid-call (the sandbox
process died, OOM, a signal) comes back as a tool error the model can retry; a sandbox whose
workspace vanished is replaced on the next call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_fleet.domain.model import ToolSpec
from agent_fleet.hands.port import Sandbox, ToolOutput
from agent_fleet.hands.sandbox import LazySandbox, SandboxError

__all__ = ["RUN", "RUN_COMMAND", "SandboxHands"]

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


RUN = ToolSpec(
    "run",
    "Run a shell command in your own sandbox, in your workspace (where your edits are). Returns its output "
    "and exit code; a command that runs too long is killed.",
    RUN_COMMAND.parameters,
)


class SandboxHands:
    """Invariant: one tool, named by ``spec``; every command runs in the one lazily made sandbox."""

    def __init__(
        self,
        sandbox: LazySandbox,
        *,
        max_timeout: float = 300.0,
        spec: ToolSpec = RUN_COMMAND,
        acquire: Callable[[], Awaitable[Sandbox]] | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._max_timeout = max_timeout
        self._spec = spec
        # How a command gets its sandbox: the file tools' own way where they keep edits in it
        # (a replaced sandbox gets them again before the command runs).
        self._acquire = acquire or sandbox.get

    def specs(self) -> tuple[ToolSpec, ...]:
        return (self._spec,)

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        if name != self._spec.name:
            return ToolOutput(f"error: unknown tool {name!r}", is_error=True)
        command = input.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolOutput(f"error: {name} needs a non-empty string 'command'", is_error=True)
        timeout = input.get("timeout")
        wall = self._max_timeout
        if isinstance(timeout, int | float) and timeout > 0:
            wall = min(float(timeout), self._max_timeout)
        try:
            box = await self._acquire()
            run = await box.run(command, timeout=wall)
        except SandboxError as exc:
            await self._sandbox.discard()
            return ToolOutput(f"error: the sandbox is gone ({exc}); a new one is made on the next call, retry", True)
        return ToolOutput(run.describe(), is_error=not run.ok)

    async def aclose(self) -> None:
        await self._sandbox.aclose()
