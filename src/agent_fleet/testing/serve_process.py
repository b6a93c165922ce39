"""``agent-fleet serve --port 0`` in a subprocess, for tests: yields once it listens, SIGTERM on the way out
(SIGKILL if it has not stopped in time)."""

from __future__ import annotations

import contextlib
import select
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_fleet.testing.processes import stop

__all__ = ["ServeProcess", "serve_process"]


@dataclass
class ServeProcess:
    url: str
    proc: subprocess.Popen[str]
    stderr: str = ""  # what the server wrote to stderr, once it has stopped


@contextlib.contextmanager
def serve_process(
    cwd: Path, env: Mapping[str, str], *, store: str, config: str = "fleet.yaml", timeout: float = 60
) -> Iterator[ServeProcess]:
    """The server in ``cwd`` with ``env`` (nothing else of this process's environment), ``--config
    config --store store``. On the way out it is stopped with SIGTERM (unless it already ended) and
    its stderr kept in ``stderr``."""
    cmd = [sys.executable, "-m", "agent_fleet.cli", "serve", "--port", "0", "--config", config, "--store", store]
    proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    url = proc.stdout.readline().strip() if ready else ""
    served = ServeProcess(url, proc)
    try:
        if not url.startswith("http://127.0.0.1:"):
            raise AssertionError(proc.stderr.read() if proc.poll() is not None else f"serve printed {url!r}")
        yield served
    finally:
        # SIGTERM, then SIGKILL by pid if it has not stopped within the timeout: never left running.
        _, err = stop(proc, sig=signal.SIGTERM, timeout=timeout)
        served.stderr = err or ""
