"""Suite-wide: every process the tests start is gone when the suite ends.

Each pytest process (the single one with ``-n 0``, else every xdist worker) puts a mark of its own in
its environment as it starts; every process a test starts inherits it, however deep (servers, the
CLI, gateways, a Ray node's raylet). When the process's tests are done, a session-scoped check looks
for live processes carrying its mark: any left (after a grace for ones still in their shutdown) is
killed and reported as an error, naming its pid and command line.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.aggregate.blas import one_blas_thread_by_default
from agent_fleet.testing.processes import kill_now

one_blas_thread_by_default()  # as the agent-fleet command runs: set before any test loads numpy
# The suite runs more workers than the machine has cores, so a library's own pool of threads in each
# worker (torch's OpenMP threads spin while they wait) only adds to the contention: one each.
os.environ.setdefault("OMP_NUM_THREADS", "1")

MARK = "FLEET_TEST_PROCESS_MARK"
GRACE_S = 10.0


def pytest_configure(config: pytest.Config) -> None:
    os.environ[MARK] = f"{os.getpid()}-{uuid.uuid4().hex}"  # a worker replaces the controller's mark


def _marked(mark: str) -> dict[int, str]:
    """Live processes (not this one) whose environment carries ``mark``: pid → command line."""
    needle = f"{MARK}={mark}".encode()
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":  # ended, waiting for its parent to read its status: nothing runs
                continue
            found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fails the run if a process a test started still runs after this process's last test."""
    yield
    mark = os.environ.get(MARK, "")
    if not mark or not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + GRACE_S
    left = _marked(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _marked(mark)
    for pid in left:
        kill_now(pid)
    if left:
        lines = "\n".join(f"  pid {pid}: {cmd[:200]}" for pid, cmd in sorted(left.items()))
        pytest.fail(f"{len(left)} process(es) started by the tests were still running (now killed):\n{lines}")
