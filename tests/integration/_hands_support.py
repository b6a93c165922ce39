"""Shared helpers for the hands integration tests (not collected: no test_ prefix)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Unpack

from agent_fleet.hands import isolation
from agent_fleet.hands.port import CommandOptions, CompletedRun, ProvisionOptions, Sandbox, SandboxState
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig

MODES = ["bwrap", "plain"]


def have_bwrap() -> bool:
    return isolation.bwrap_path() is not None


@contextmanager
def sandbox_root() -> Iterator[Path]:
    """A workspace root an unprivileged sandbox user can traverse (pytest's tmp_path is 0700)."""
    top = Path(tempfile.mkdtemp(prefix="fleet-sbx-"))
    os.chmod(top, 0o755)
    try:
        yield top / "sandboxes"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def make_provider(mode: str, root: Path, **kw: object) -> LocalSandboxProvider:
    import pytest

    if mode == "bwrap" and not have_bwrap():
        pytest.skip("bubblewrap is not available here")
    return LocalSandboxProvider(SandboxConfig(root=root, use_bwrap=(mode == "bwrap"), **kw))  # type: ignore[arg-type]


def marked_pids(sandbox_id: str) -> list[int]:
    return sorted(pid for pid, m in isolation.scan_marked() if m.get(isolation.SANDBOX_VAR) == sandbox_id)


def owner_pids(owner: str) -> list[int]:
    return sorted(pid for pid, m in isolation.scan_marked() if m.get(isolation.OWNER_VAR) == owner)


def git_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-C", str(path), *cmd], check=True, env=env, capture_output=True)
    return path


def worktrees(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True)
    return [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("worktree ")]


class Snapshots:
    """A sandbox provider that keeps what each session's worktree holds when its sandbox closes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.at_close: dict[str, dict[str, str]] = {}  # session -> the .py files, at its last close

    async def provision(self, resources: ResourceSpec, **options: Unpack[ProvisionOptions]) -> Sandbox:
        return _Snapshotted(await self.inner.provision(resources, **options), self)


class _Snapshotted:
    def __init__(self, box: Sandbox, owner: Snapshots) -> None:
        self._box, self._owner = box, owner
        self.sandbox_id, self.session_id, self.workdir = box.sandbox_id, box.session_id, box.workdir

    @property
    def state(self) -> SandboxState:
        return self._box.state

    async def run(self, command: str | Sequence[str], **options: Unpack[CommandOptions]) -> CompletedRun:
        return await self._box.run(command, **options)

    def kill_processes(self) -> list[int]:
        return self._box.kill_processes()

    async def capture(self, scratch: Sequence[str] = ()) -> dict[str, Any] | None:
        return await self._box.capture(scratch)

    async def aclose(self) -> None:
        if self.workdir.is_dir():
            files = {str(p.relative_to(self.workdir)): p.read_text() for p in sorted(self.workdir.rglob("*.py"))}
            self._owner.at_close[self.session_id] = files
        await self._box.aclose()
