"""End-to-end helpers: the real CLI in subprocesses against the simulated provider over loopback HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.sim.provider import LogNormalLatency, SimConfig, sim_provider_process

API_KEY = "sk-e2e-" + "7f3a9c" * 4


@dataclass
class Cli:
    cwd: Path
    base_url: str
    store: str

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OPENAI_", "ANTHROPIC_"))}
        env.update(FLEET_BASE_URL=self.base_url, FLEET_API_KEY=API_KEY, FLEET_STORE=self.store)
        env.update(extra)
        return env

    def popen(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "agent_fleet.cli", *args],
            cwd=self.cwd,
            env=self.env(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *args: str, timeout: float = 240, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agent_fleet.cli", *args],
            cwd=self.cwd,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def json(self, *args: str, **extra: str) -> tuple[int, dict[str, Any]]:
        proc = self.run(*args, "--json", **extra)
        assert proc.stdout.strip(), proc.stderr
        return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with sim_provider_process(SimConfig(latency=LogNormalLatency(median=0.05, sigma=0.3), seed=3)) as url:
        yield url


@pytest.fixture
def cli(tmp_path: Path, sim_url: str) -> Cli:
    return Cli(cwd=tmp_path, base_url=sim_url, store=f"sqlite:///{tmp_path / 'fleet.db'}")


def write_lines(path: Path, n: int) -> Path:
    hosts = ["docs.python.org", "peps.python.org", "realpython.com", "stackoverflow.com", "github.com"]
    words = ["asyncio", "typing", "packaging", "testing", "logging", "pathlib", "dataclasses", "sqlite"]
    lines = [f"https://{hosts[i % len(hosts)]}/{words[i % len(words)]}/page-{i}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def slow_url() -> Iterator[str]:
    """Half a second a call: a 200-session run lasts long enough to be killed five times."""
    with sim_provider_process(SimConfig(latency=LogNormalLatency(median=0.5, sigma=0.2), seed=5)) as url:
        yield url


@pytest.fixture
def slow_cli(tmp_path: Path, slow_url: str) -> Cli:
    return Cli(cwd=tmp_path, base_url=slow_url, store=f"sqlite:///{tmp_path / 'fleet.db'}")
