"""SIGTERM while the CLI is still starting ends it the way a later one does: exit 130, one line.

The real ``agent-fleet`` script in a real process, a real signal: 0.2 s into its start-up the command
is still importing what it runs on, long before its event loop exists (the engine alone takes more
than a second of CPU to import).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import Cli, write_lines

AGENT_FLEET = str(Path(sys.executable).with_name("agent-fleet"))
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _after_start(proc: subprocess.Popen[str], seconds: float) -> None:
    """``seconds`` after the process started: on an idle machine that is wall time; on a loaded one
    (other processes taking the cores) wall time says little about how far the process got, so also
    wait until it has had ``seconds`` of CPU itself."""
    time.sleep(seconds)
    deadline = time.monotonic() + 30
    while _cpu_seconds(proc.pid) < seconds and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)


def test_sigterm_0_2_s_after_deploy_starts_exits_130_with_one_line(cli: Cli, tmp_path: Path) -> None:
    src = write_lines(tmp_path / "urls.txt", 40)
    proc = subprocess.Popen(
        [AGENT_FLEET, "deploy", "--task", "Summarise each page", "--input", str(src), "--agents", "4"],
        cwd=cli.cwd,
        env=cli.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _after_start(proc, 0.2)
    assert proc.poll() is None, "the command ended before the signal"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines() == ["agent-fleet: interrupted (resumable)"]
    assert out == ""
