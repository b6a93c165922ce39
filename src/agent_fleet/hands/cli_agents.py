"""CLI agents as fleet members: ``deploy --agent-cmd CMD`` runs an external agent per partition.

Contract (SPEC.md, "CLI agents"): ``CMD`` runs through the shell once per partition, inside that
session's sandbox, with the partition's workspace as working directory. ``{task}`` and
``{partition}`` are replaced, shell-quoted, by the task text and the path of a file listing the
partition's items one per line (``{analytics_log}`` too: where aider should write its analytics).
The environment carries ``FLEET_TASK``, ``FLEET_PARTITION``, ``FLEET_SESSION_ID``,
``FLEET_ANALYTICS_LOG``, and the gateway: ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, with
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` set to the session's own gateway token — never a provider
key (the sandbox refuses any value equal to one of the engine's credentials). A CLI that outlives
its hard timeout is killed with its whole process group and reported ``timed_out`` so the
dispatcher can reassign the session; when the command exits, its process group is gone.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.results import ResultItem
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import UsageError
from agent_fleet.hands.cli_formats import FORMATS, CliReport, parse_output
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import SandboxError, SandboxProvider

__all__ = ["CliAgentSpec", "CliOutcome", "GatewayAccess", "render_command", "run_cli_agent"]

PARTITION_FILE = ".fleet-partition.txt"
ANALYTICS_FILE = ".fleet-analytics.jsonl"
_STDERR_TAIL = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class CliAgentSpec:
    command: str  # --agent-cmd
    format: str = "jsonl"  # --agent-format
    timeout: float = 900.0  # hard wall clock per run
    resources: ResourceSpec = field(default_factory=ResourceSpec)

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise UsageError("--agent-cmd is empty")
        if self.format not in FORMATS:
            raise UsageError(f"unknown --agent-format {self.format!r} (choose from {', '.join(FORMATS)})")
        if self.timeout <= 0:
            raise UsageError("the CLI agent timeout must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayAccess:
    """How a CLI agent reaches the gateway: base URLs and the session's own token."""

    openai_base_url: str
    anthropic_base_url: str
    token: str

    def __repr__(self) -> str:
        return f"GatewayAccess(openai={self.openai_base_url!r}, anthropic={self.anthropic_base_url!r}, token=***)"


@dataclass(frozen=True, slots=True)
class CliOutcome:
    session_id: str
    partition_id: str
    items: tuple[ResultItem, ...]
    usage: Usage
    cost_usd: Decimal | None  # as the CLI reported it (the gateway's meter is authoritative)
    exit_code: int | None
    timed_out: bool
    killed: bool
    error: str | None
    stderr_tail: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.error is None


def render_command(command: str, *, task: str, partition_file: str, analytics_log: str) -> str:
    """Substitute the placeholders, each shell-quoted; other braces are left alone."""
    out = command
    for key, value in (("{task}", task), ("{partition}", partition_file), ("{analytics_log}", analytics_log)):
        out = out.replace(key, shlex.quote(value))
    return out


def _partition_lines(partition: Partition) -> str:
    return "".join(f"{item}\n" for item in partition.items)


def _result_items(report: CliReport, session_id: str, partition_id: str) -> tuple[ResultItem, ...]:
    out: list[ResultItem] = []
    for n, raw in enumerate(report.items):
        extra = {k: v for k, v in raw.items() if k not in ("title", "body", "category", "confidence", "location")}
        out.append(
            ResultItem(
                id=f"{session_id}.c{n:04d}",
                partition_id=partition_id,
                session_id=session_id,
                title=raw["title"],
                body=raw["body"],
                category=raw.get("category"),
                confidence=raw.get("confidence"),
                location=raw.get("location"),
                extra=extra,
            )
        )
    return tuple(out)


async def run_cli_agent(
    spec: CliAgentSpec,
    *,
    provider: SandboxProvider,
    session_id: str,
    partition: Partition,
    task: str,
    gateway: GatewayAccess,
    input_root: Path | None = None,
) -> CliOutcome:
    """Run ``spec.command`` for one partition in a fresh sandbox and read its output.

    Never raises for what the CLI does (non-zero exit, garbage output, a hang): that is in the
    outcome. Raises :class:`SandboxError` only if no sandbox could be created.
    """
    source = input_root if partition.kind is InputKind.DIRECTORY else None
    items = partition.items if source is not None else ()
    box = await provider.provision(
        spec.resources, session_id=session_id, source=source, items=items, allow_network=True
    )
    try:
        partition_file = str(box.workdir / PARTITION_FILE)
        analytics_log = str(box.workdir / ANALYTICS_FILE)
        wrote = await box.run(
            ["/bin/sh", "-c", f"cat > {shlex.quote(partition_file)}"],
            stdin=_partition_lines(partition).encode(),
            timeout=60,
        )
        if not wrote.ok:
            raise SandboxError(f"could not write the partition file: {wrote.stderr.strip()[:200]}")
        env = {
            "FLEET_TASK": task,
            "FLEET_PARTITION": partition_file,
            "FLEET_SESSION_ID": session_id,
            "FLEET_ANALYTICS_LOG": analytics_log,
            "OPENAI_BASE_URL": gateway.openai_base_url,
            "ANTHROPIC_BASE_URL": gateway.anthropic_base_url,
            "OPENAI_API_KEY": gateway.token,
            "ANTHROPIC_API_KEY": gateway.token,
        }
        cmd = render_command(spec.command, task=task, partition_file=partition_file, analytics_log=analytics_log)
        run = await box.run(cmd, timeout=spec.timeout, env_extra=env)
        analytics = ""
        if spec.format == "aider":
            analytics = await asyncio.to_thread(_read_text, Path(analytics_log))
        report = parse_output(spec.format, run.stdout, analytics_log=analytics)
    finally:
        await box.aclose()
    error = report.error
    if run.timed_out:
        error = f"timed out after {spec.timeout:g} s; killed"
    elif run.killed:
        error = f"killed by signal {run.signal}"
    elif run.exit_code != 0 and error is None:
        error = f"exited with code {run.exit_code}"
    return CliOutcome(
        session_id=session_id,
        partition_id=partition.id,
        items=_result_items(report, session_id, partition.id),
        usage=report.usage,
        cost_usd=report.cost_usd,
        exit_code=run.exit_code,
        timed_out=run.timed_out,
        killed=run.killed,
        error=error,
        stderr_tail=run.stderr[-_STDERR_TAIL:],
        duration=run.duration,
    )


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
