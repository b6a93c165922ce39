"""File tools served from inside the session's sandbox (fleet.yaml ``hands: {files: sandbox}``).

``read_file``, ``list_files`` and ``grep`` keep their contract (SPEC.md: scoped to the partition; a
path outside it is an error returned to the model, never a read), but reads run as processes in
the session's own workspace — the git worktree or the copy of its files — under the sandbox's
isolation and limits, so the model reads what its own ``run_command`` calls left there. The sandbox
is provisioned on the first read (lazily), shared with ``run_command``.

Reads are idempotent, so a read whose sandbox died under it (the process killed, the workspace
gone) is retried in a fresh sandbox, up to ``retries`` times, before the model sees an error.
``grep`` patterns are POSIX extended regular expressions (``grep -E``).
"""

from __future__ import annotations

from agent_fleet.hands.files import FileTools
from agent_fleet.hands.port import ToolOutput
from agent_fleet.hands.sandbox import CompletedRun, LazySandbox, SandboxError

__all__ = ["SandboxFiles"]

_MAX_READ_CHARS = 200_000
_MAX_GREP_LINES = 200
_READ_TIMEOUT = 60.0


class SandboxFiles(FileTools):
    """Invariant: only the partition's paths are ever passed to a command, always after ``--``."""

    def __init__(self, sandbox: LazySandbox, paths: tuple[str, ...], *, retries: int = 2) -> None:
        super().__init__(paths)
        self._sandbox = sandbox
        self._retries = retries
        self.replaced = 0  # sandboxes that died under a read and were replaced

    async def aclose(self) -> None:
        await self._sandbox.aclose()

    async def _run(self, argv: list[str]) -> CompletedRun | None:
        """Run in the sandbox, replacing it when it dies under the command. None: it kept dying."""
        for _ in range(self._retries + 1):
            try:
                box = await self._sandbox.get()
                run = await box.run(argv, timeout=_READ_TIMEOUT)
            except SandboxError:
                run = None
            if run is not None and not run.killed:
                return run
            self.replaced += 1
            await self._sandbox.discard()
        return None

    async def read(self, rel: str) -> ToolOutput:
        norm = rel.strip().removeprefix("./")
        if norm not in self._allowed or norm.startswith("-"):
            return ToolOutput(f"error: {rel!r} is not in this partition", is_error=True)
        run = await self._run(["cat", "--", norm])
        if run is None:
            return ToolOutput("error: the sandbox died while reading; retry", is_error=True)
        if run.exit_code != 0:
            reason = run.stderr.strip().splitlines()[-1:] or [f"exit code {run.exit_code}"]
            return ToolOutput(f"error: cannot read {rel!r}: {reason[0][:200]}", is_error=True)
        text = run.stdout
        if len(text) > _MAX_READ_CHARS or run.truncated:
            text = text[:_MAX_READ_CHARS] + f"\n[truncated at {min(len(text), _MAX_READ_CHARS)} characters]"
        return ToolOutput(text)

    async def grep(self, pattern: str) -> ToolOutput:
        if not self._paths:
            return ToolOutput("no matches")
        run = await self._run(["grep", "-n", "-H", "-I", "-E", "-e", pattern, "--", *self._paths])
        if run is None:
            return ToolOutput("error: the sandbox died while searching; retry", is_error=True)
        if run.exit_code == 2 and not run.stdout:
            reason = (run.stderr.strip().splitlines() or ["bad pattern"])[0]
            return ToolOutput(f"error: {reason[:200]}", is_error=True)
        out: list[str] = []
        for line in run.stdout.splitlines():
            path, _, rest = line.partition(":")
            no, _, text = rest.partition(":")
            out.append(f"{path}:{no}: {text.strip()[:300]}")
            if len(out) >= _MAX_GREP_LINES:
                out.append(f"[stopped after {_MAX_GREP_LINES} matches]")
                break
        return ToolOutput("\n".join(out) if out else "no matches")
