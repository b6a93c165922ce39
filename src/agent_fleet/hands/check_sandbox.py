"""One check of one change: ``CMD`` through the shell in a sandbox holding the base plus that change.

:func:`run_check` provisions a fresh sandbox whose workspace is a worktree of the run's base commit
with the change's patch applied (before the sandbox's user gets the files), runs the command with its
working directory the input's directory inside that tree, and closes the sandbox whatever happens.
The command sees the sandbox's scrubbed environment only: no provider key, no git credential.

The outcome is ``passed`` (exit 0), ``failed`` (any other exit, a kill, or a change that does not
apply to its base) or ``timeout`` (the wall clock ran out; the command's process group was killed).
What decides it is the command's own exit, never its output.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet.clock import Clock, RealClock
from agent_fleet.hands.port import CompletedRun, SandboxProvider
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import SandboxError

__all__ = ["OUTCOMES", "TAIL_CHARS", "CheckRun", "CheckSpec", "run_check", "shell_in"]

OUTCOMES = ("passed", "failed", "timeout", "skipped")
TAIL_CHARS = 4000  # how much of a check's output is kept (its end: where test runners say what failed)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckSpec:
    """How every check of a run runs: the command, where, under which limits."""

    command: str
    repo: Path  # the repository's top level (the run's input repository, or the engine's clone)
    base: str  # the run's base commit
    subdir: str = ""  # the input's directory relative to ``repo`` ("" for the top level)
    timeout: float = 600.0
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    allow_network: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRun:
    outcome: str  # passed | failed | timeout | skipped
    duration_s: float
    output_tail: str
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "duration_s": round(self.duration_s, 3),
            "output_tail": self.output_tail,
            "exit_code": self.exit_code,
        }


def _tail(text: str, limit: int = TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _judge(run: CompletedRun) -> CheckRun:
    output = run.stdout + (("\n" if run.stdout and not run.stdout.endswith("\n") else "") + run.stderr)
    if run.timed_out:
        outcome = "timeout"
    elif run.exit_code == 0 and not run.killed:
        outcome = "passed"
    else:
        outcome = "failed"
        if run.killed:
            output += f"\n[killed by signal {run.signal}]"
    return CheckRun(outcome=outcome, duration_s=run.duration, output_tail=_tail(output), exit_code=run.exit_code)


def shell_in(subdir: str, command: str) -> str:
    """``command`` through the shell, from ``subdir`` of the workspace (the input's directory)."""
    if not subdir or subdir == ".":
        return command
    return f"cd {shlex.quote(subdir)} || exit 125\n{command}"


async def run_check(
    provider: SandboxProvider, spec: CheckSpec, *, name: str, patch: bytes, clock: Clock | None = None
) -> CheckRun:
    """Run ``spec.command`` against the base plus ``patch`` in a fresh sandbox (module docstring).
    ``name`` names the sandbox's owner (the change's session). Never raises for what the command
    does; a change that does not apply, or a base that is gone, is a ``failed`` outcome saying so."""
    clock = clock or RealClock()
    started = clock.now()
    try:
        box = await provider.provision(
            spec.resources,
            session_id=name,
            source=spec.repo,
            commit=spec.base,
            patch=patch,
            allow_network=spec.allow_network,
        )
    except (SandboxError, ValueError, OSError, subprocess.SubprocessError) as exc:
        return CheckRun(outcome="failed", duration_s=clock.now() - started, output_tail=_tail(_why(exc)))
    try:
        run = await box.run(shell_in(spec.subdir, spec.command), timeout=spec.timeout)
    except SandboxError as exc:  # the sandbox died under the command
        return CheckRun(outcome="failed", duration_s=clock.now() - started, output_tail=_tail(str(exc)))
    finally:
        await box.aclose()
    return _judge(run)


def _why(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else str(exc.stderr or "")
        return f"the check's workspace could not be made: {err.strip() or exc}"
    return str(exc)
