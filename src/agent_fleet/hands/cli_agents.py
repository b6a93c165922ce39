"""CLI agents as fleet members: ``deploy --agent-cmd CMD`` runs an external agent per partition.

Contract (SPEC.md, "CLI agents"): ``CMD`` runs through the shell once per partition, inside that
session's sandbox, with the partition's workspace as working directory. ``{task}`` and
``{partition}`` are replaced, shell-quoted, by the task text and the path of a file listing the
partition's items one per line (``{analytics_log}`` too: where aider should write its analytics).
The environment carries ``FLEET_TASK``, ``FLEET_PARTITION``, ``FLEET_SESSION_ID``,
``FLEET_ANALYTICS_LOG``, and the gateway: ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, with
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` set to the session's own gateway token — never a provider
key (the sandbox refuses any value equal to one of the engine's credentials); a tool that reads its
provider from a file of its own finds it in its home (:mod:`~agent_fleet.hands.cli_setup`: Codex
CLI's ``config.toml``). A CLI that outlives
its hard timeout is killed with its whole process group and reported ``timed_out`` so the
dispatcher can reassign the session; when the command exits, its process group is gone.

In a run that keeps its sessions' changes (``changes``), the sandbox is a worktree of the run's
base, and a run that succeeded has its change captured (:meth:`Sandbox.capture`) before the
sandbox is removed: the outcome carries it, for the session's completion to record.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from agent_fleet.domain.plan import InputKind, Partition
from agent_fleet.domain.results import ResultItem
from agent_fleet.errors import UsageError
from agent_fleet.hands.cli_formats import FORMATS, CliReport, authentication_failed, edited_paths, parse_output
from agent_fleet.hands.cli_setup import setup_files
from agent_fleet.hands.cli_state import CliState, read_own_files, resumed_command
from agent_fleet.hands.port import (
    CliOutcome,
    CompletedRun,
    GatewayAccess,
    Sandbox,
    SandboxProvider,
    WorkspaceChanges,
)
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import SandboxError

# CliOutcome and GatewayAccess are the hands port's; named here too.
__all__ = [
    "QUIET_ENV",
    "CliAgentSpec",
    "CliOutcome",
    "CommandAgent",
    "GatewayAccess",
    "render_command",
]

PARTITION_FILE = ".fleet-partition.txt"
ANALYTICS_FILE = ".fleet-analytics.jsonl"
_STDERR_TAIL = 2000
_ERROR_TAIL = 600  # of stderr, in the error an attempt fails with
_STOP_GRACE = 2.0  # seconds a CLI refused on budget gets to exit by itself before it is stopped

# Every CLI agent runs with these: no telemetry, update checks, error reports or other traffic that
# is not a model call (Claude Code, aider, litellm; Codex's are in the config.toml cli_setup writes,
# and the proxy below covers the rest).
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "AIDER_ANALYTICS": "false",
    "AIDER_CHECK_UPDATE": "false",
    "AIDER_SHOW_RELEASE_NOTES": "false",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "NO_COLOR": "1",
}
# Without egress, a proxy nobody listens on: anything but the gateway fails at once.
_NO_EGRESS_PROXY = "http://127.0.0.1:9"


@dataclass(frozen=True, slots=True, kw_only=True)
class CliAgentSpec:
    command: str  # --agent-cmd
    format: str = "jsonl"  # --agent-format
    timeout: float = 900.0  # hard wall clock per run
    resources: ResourceSpec = field(default_factory=ResourceSpec)
    egress: bool = False  # may reach hosts other than the gateway (fleet.yaml hands.allow_network)

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise UsageError("--agent-cmd is empty")
        if self.format not in FORMATS:
            raise UsageError(f"unknown --agent-format {self.format!r} (choose from {', '.join(FORMATS)})")
        if self.timeout <= 0:
            raise UsageError("the CLI agent timeout must be positive")


@dataclass(frozen=True, slots=True)
class CommandAgent:
    """The :class:`~agent_fleet.hands.port.CliAgent` of ``deploy --agent-cmd``: ``spec`` run in
    sandboxes from ``sandboxes`` (directory inputs from ``input_root``)."""

    spec: CliAgentSpec
    sandboxes: SandboxProvider
    input_root: Path | None = None
    changes: WorkspaceChanges | None = None  # the run keeps its sessions' changes

    async def run(
        self,
        *,
        session_id: str,
        partition: Partition,
        task: str,
        gateway: GatewayAccess,
        resume: CliState | None = None,
        stop: asyncio.Event | None = None,
        keep: Callable[[CliState], None] | None = None,
    ) -> CliOutcome:
        """Run ``spec.command`` for one partition in a fresh sandbox and read its output, as
        :meth:`CliAgent.run <agent_fleet.hands.port.CliAgent.run>` says; a ``resume`` is written back
        into the sandbox for the command to continue (:mod:`~agent_fleet.hands.cli_state`)."""
        spec = self.spec
        source = self.input_root if partition.kind is InputKind.DIRECTORY else None
        items = partition.items if source is not None else ()
        changes = self.changes if source is not None else None
        box = await self.sandboxes.provision(
            spec.resources, session_id=session_id, source=source, items=items, allow_network=True, changes=changes
        )
        change = None
        try:
            home = box.workdir
            partition_file = str(home / PARTITION_FILE)
            analytics_log = str(home / ANALYTICS_FILE)
            await _seed_box(box, home, partition_file, spec=spec, partition=partition, gateway=gateway, resume=resume)
            env = agent_env(
                task=task,
                partition_file=partition_file,
                session_id=session_id,
                analytics_log=analytics_log,
                gateway=gateway,
                egress=spec.egress,
            )
            command = resumed_command(spec.command, spec.format, resume)
            cmd = render_command(command, task=task, partition_file=partition_file, analytics_log=analytics_log)
            try:
                run, stopped = await _run_until_stopped(box, cmd, timeout=spec.timeout, env=env, stop=stop)
            except asyncio.CancelledError:  # preempted or moved: keep the conversation for the next attempt
                if keep is not None:
                    left = await asyncio.to_thread(read_own_files, spec.format, home)
                    sid = resume.cli_session_id if resume is not None else None
                    if left:
                        keep(CliState(spec.format, _session_in(spec.format, left) or sid, str(home), left))
                raise
            analytics = await asyncio.to_thread(_read_text, Path(analytics_log)) if spec.format == "aider" else ""
            files = await asyncio.to_thread(read_own_files, spec.format, home)
            edited = tuple(edited_paths(spec.format, run.stdout, files))
            if edited:
                files.update(await asyncio.to_thread(read_own_files, "jsonl", home, edited))
            report = parse_output(spec.format, run.stdout, analytics_log=analytics, files=files)
            failure = _failure(run, report, spec.timeout)
            if failure is None and not stopped:  # the session completes with what it changed
                change = await box.capture()
        finally:
            await box.aclose()
        conversation = {k: v for k, v in files.items() if k not in edited}
        sid = report.cli_session_id or (resume.cli_session_id if resume is not None else None)
        state = CliState(spec.format, sid, str(home), conversation) if conversation else resume
        return CliOutcome(
            session_id=session_id,
            partition_id=partition.id,
            items=_result_items(report, session_id, partition),
            usage=report.usage,
            cost_usd=report.cost_usd,
            exit_code=run.exit_code,
            timed_out=run.timed_out,
            killed=run.killed,
            error=failure,
            stderr_tail=run.stderr[-_STDERR_TAIL:],
            duration=run.duration,
            cli_session_id=sid,
            state=state,
            stopped=stopped,
            auth_failed=authentication_failed(report.error),
            change=change,
        )


def render_command(command: str, *, task: str, partition_file: str, analytics_log: str) -> str:
    """Substitute the placeholders, each shell-quoted; other braces are left alone."""
    out = command
    for key, value in (("{task}", task), ("{partition}", partition_file), ("{analytics_log}", analytics_log)):
        out = out.replace(key, shlex.quote(value))
    return out


def _partition_lines(partition: Partition) -> str:
    return "".join(f"{item}\n" for item in partition.items)


def _anchored(location: str | None, partition: Partition) -> str | None:
    """A location as a path of the partition: tools name files relative to where they work (aider
    without git: the files' common directory), so a path that is the tail of exactly one partition
    file becomes that file's path."""
    if location is None or partition.kind is not InputKind.DIRECTORY:
        return location
    path, sep, line = location.partition(":")
    if path in partition.items:
        return location
    matches = [p for p in partition.items if p.endswith("/" + path.lstrip("./"))]
    return f"{matches[0]}{sep}{line}" if len(matches) == 1 else location


def _result_items(report: CliReport, session_id: str, partition: Partition) -> tuple[ResultItem, ...]:
    partition_id = partition.id
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
                location=_anchored(raw.get("location"), partition),
                extra=extra,
            )
        )
    return tuple(out)


def agent_env(
    *, task: str, partition_file: str, session_id: str, analytics_log: str, gateway: GatewayAccess, egress: bool
) -> dict[str, str]:
    """The environment a CLI agent runs with (SPEC.md "CLI agents")."""
    env = {
        **QUIET_ENV,
        "FLEET_TASK": task,
        "FLEET_PARTITION": partition_file,
        "FLEET_SESSION_ID": session_id,
        "FLEET_ANALYTICS_LOG": analytics_log,
        "OPENAI_BASE_URL": gateway.openai_base_url,
        "ANTHROPIC_BASE_URL": gateway.anthropic_base_url,
        "OPENAI_API_KEY": gateway.token,
        "ANTHROPIC_API_KEY": gateway.token,
    }
    if not egress:
        hosts = {"127.0.0.1", "localhost", "::1"}
        hosts |= {urlsplit(u).hostname or "" for u in (gateway.openai_base_url, gateway.anthropic_base_url)}
        direct = ",".join(sorted(h for h in hosts if h))
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            env[name] = env[name.lower()] = _NO_EGRESS_PROXY
        env["NO_PROXY"] = env["no_proxy"] = direct
    return env


async def _write_file(box: Sandbox, path: Path, text: str) -> None:
    """Write a file inside the sandbox as its own user, so the command owns what it continues."""
    q = shlex.quote(str(path))
    cmd = f"mkdir -p {shlex.quote(str(path.parent))} && cat > {q}"
    wrote = await box.run(["/bin/sh", "-c", cmd], stdin=text.encode(), timeout=60)
    if not wrote.ok:
        raise SandboxError(f"could not write {path.name} into the sandbox: {wrote.stderr.strip()[:200]}")


async def _run_until_stopped(
    box: Sandbox, cmd: str, *, timeout: float, env: dict[str, str], stop: asyncio.Event | None
) -> tuple[CompletedRun, bool]:
    """Run ``cmd``; once ``stop`` is set it gets a short grace to exit, then its group is killed."""
    if stop is None:
        return await box.run(cmd, timeout=timeout, env_extra=env), False
    async with asyncio.TaskGroup() as tg:
        running = tg.create_task(box.run(cmd, timeout=timeout, env_extra=env))
        stopping = tg.create_task(stop.wait())
        await asyncio.wait([running, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(running), _STOP_GRACE)
        if not running.done():
            running.cancel()
        stopping.cancel()
    if running.cancelled():
        return CompletedRun(exit_code=None, stdout="", stderr="", killed=True), True
    return running.result(), stop.is_set()


def _failure(run: CompletedRun, report: CliReport, timeout: float) -> str | None:
    """Why the attempt failed (None: it did not), with the tail of the command's stderr."""
    if run.timed_out:
        return f"timed out after {timeout:g} s; killed"
    if run.killed:
        error = f"killed by signal {run.signal}"
    elif run.exit_code != 0:
        error = f"exited with code {run.exit_code}"
        if report.error is not None:
            error += f": {report.error}"
    elif report.error is not None:
        error = f"reported an error: {report.error}"
    else:
        return None
    tail = run.stderr.strip()[-_ERROR_TAIL:]
    return f"{error}; stderr: {tail}" if tail else error


async def _seed_box(
    box: Sandbox,
    home: Path,
    partition_file: str,
    *,
    spec: CliAgentSpec,
    partition: Partition,
    gateway: GatewayAccess,
    resume: CliState | None,
) -> None:
    """Write the partition, the tool's setup files and, resuming, its earlier conversation into the box."""
    await _write_file(box, Path(partition_file), _partition_lines(partition))
    for rel, text in setup_files(spec.format, openai_base_url=gateway.openai_base_url).items():
        await _write_file(box, home / rel, text)
    if resume is not None:
        for rel, text in resume.relocated(home).items():
            await _write_file(box, home / rel, text)


def _session_in(fmt: str, files: dict[str, str]) -> str | None:
    """The tool's session id from its own files alone (the run printed nothing)."""
    return parse_output(fmt, "", files=files).cli_session_id


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
