"""The demo's git repository: the bundled sample committed once, reused while the sample is the same."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_fleet.cli.demo import SAMPLE, demo_repository


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_sample_becomes_one_commit_the_same_everywhere_and_is_reused(tmp_path: Path) -> None:
    first = demo_repository(tmp_path / "a" / "demo-repo")
    other = demo_repository(tmp_path / "b" / "demo-repo")
    assert first is not None and other is not None
    assert git(first, "rev-parse", "HEAD") == git(other, "rev-parse", "HEAD")  # fixed author and date
    assert git(first, "status", "--porcelain") == ""
    assert (first / "stockroom" / "app.py").read_bytes() == (SAMPLE / "stockroom" / "app.py").read_bytes()
    # the sample's ignored files are not committed (build output, logs), like any repository's
    tracked = set(git(first, "ls-files").splitlines())
    assert "stockroom/app.py" in tracked and not any(t.startswith("build/") or t.endswith(".log") for t in tracked)
    # reused as it is: a branch a run made stays
    git(first, "branch", "fleet/run-x")
    assert demo_repository(first) == first and "fleet/run-x" in git(first, "branch", "--list", "fleet/*")
    # another sample (here: its commit says so) makes it again
    git(first, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "something else")
    assert demo_repository(first) == first
    assert git(first, "rev-parse", "HEAD") == git(other, "rev-parse", "HEAD")
    assert git(first, "branch", "--list", "fleet/*") == ""


def test_without_git_there_is_no_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert demo_repository(tmp_path / "demo-repo") is None
    assert not (tmp_path / "demo-repo").exists()
