"""Checks as a quota: each check of a change is a Workload of one ``fleet.dev/checks``, admitted by the
run's admission controller, and runs in a real sandbox holding the base plus that change.

How many run at once is measured from the checks' own clocks: each check command appends its start
and end time (``date``) to a file outside the engine, so the bound is what the commands saw, not
what the engine counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.admission import AdmissionController, default_objects, parse_objects
from agent_fleet.admission.workload_slots import AdmissionSlots
from agent_fleet.clock import RealClock
from agent_fleet.domain.events import EventType
from agent_fleet.engine.checks import ChangeRef, CheckAdmission, RunChecks
from agent_fleet.hands.check_sandbox import CheckSpec
from agent_fleet.hands.sandbox import LocalSandboxProvider, SandboxConfig
from agent_fleet.session.store import open_store

RUN = "run-checks"
SLEEP = 0.6


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, check=True).stdout


def make_repo(root: Path) -> tuple[Path, str]:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("A = 1\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    return repo, _git(repo, "rev-parse", "HEAD").decode().strip()


def patch_adding(repo: Path, rel: str, text: str) -> bytes:
    """A real ``git diff --binary`` of one added file; the checkout is left as it was."""
    path = repo / rel
    path.write_text(text)
    _git(repo, "add", "-N", rel)
    diff = _git(repo, "diff", "--binary")
    _git(repo, "rm", "-q", "--cached", rel)
    path.unlink()
    return diff


def objects(checks_quota: int | None) -> Any:
    if checks_quota is None:
        return default_objects(10)  # covers pods only, as the run's default queue does
    quotas = [{"name": "pods", "nominalQuota": 10}, {"name": "fleet.dev/checks", "nominalQuota": checks_quota}]
    return parse_objects(
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "ci"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["pods", "fleet.dev/checks"],
                            "flavors": [{"name": "default", "resources": quotas}],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": "default"},
                "spec": {"clusterQueue": "ci"},
            },
        ]
    )


def max_overlap(stamps: Path) -> int:
    """The most checks running at one instant, from the start/end lines the commands wrote."""
    edges: list[tuple[float, int]] = []
    for line in stamps.read_text().splitlines():
        kind, when, _name = line.split()
        edges.append((float(when), 1 if kind == "start" else -1))
    # at equal times an end comes before a start: touching intervals do not overlap
    edges.sort(key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


async def run_checks(
    tmp_path: Path, quota: int | None, n: int = 6, *, barrier: bool = False
) -> tuple[dict[str, Any], Path, Any]:
    repo, base = make_repo(tmp_path)
    stamps = tmp_path / "stamps.txt"
    stamps.touch()
    os.chmod(stamps, 0o666)  # the sandbox's user (nobody, when the engine runs as root) appends to it
    # The check: note the start, work for a while, note the end; fail where the change added FAIL.
    # With ``barrier`` each check works until every check has started (at most 60 s): checks that
    # all run at once overlap fully however slowly the machine starts them, and checks held back
    # by a bound never do.
    work = (
        f'for _ in $(seq 600); do [ "$(grep -c ^start {stamps})" -ge {n + 1} ] && break; sleep 0.1; done'
        if barrier
        else f"sleep {SLEEP}"
    )
    command = (
        f'n=$(ls new-*.py); echo "start $(date +%s.%N) $n" >> {stamps}; {work}; '
        f'echo "end $(date +%s.%N) $n" >> {stamps}; test ! -e FAIL'
    )
    patches = [patch_adding(repo, f"pkg/new-{i}.py", f"X = {i}\n") for i in range(n)]
    patches.append(patch_adding(repo, "pkg/FAIL", "no\n") + patch_adding(repo, f"pkg/new-{n}.py", "X = 0\n"))
    changes = [
        ChangeRef(f"{RUN}.s{i:05d}", hashlib.sha256(p).hexdigest(), p, base=base, seq=3) for i, p in enumerate(patches)
    ]
    provider = LocalSandboxProvider(SandboxConfig(root=tmp_path / "sandboxes", use_bwrap=False))
    controller = AdmissionController(objects(quota), RealClock())
    sessions = AdmissionSlots(controller, queue="default")
    spec = CheckSpec(command=command, repo=repo, base=base, subdir="pkg", timeout=60)
    async with open_store(f"sqlite:///{tmp_path / 'fleet.db'}") as log:
        for c in changes:
            await log.emit_event(c.session_id, EventType.SESSION_CREATED, {"run_id": RUN})
        checks = RunChecks(
            run_id=RUN,
            spec=spec,
            provider=provider,
            log=log,
            clock=RealClock(),
            admission=CheckAdmission(sessions, queue="default", priority_class=None),
        )
        async with asyncio.TaskGroup() as tg:
            loop = tg.create_task(checks.run())
            for c in changes:
                checks.submit(c)
            outcomes = {c.session_id: await checks.outcome(c) for c in changes}
            checks.close()
            await loop
        recorded = await log.events_of_run(RUN, [EventType.CHECK])
    return outcomes, stamps, recorded


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory the sandbox's user can reach (pytest's own are private to the engine's user)."""
    top = Path(tempfile.mkdtemp(prefix="fleet-checks-"))
    os.chmod(top, 0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


async def test_a_checks_quota_of_two_bounds_the_checks_that_run(open_dir: Path) -> None:
    outcomes, stamps, recorded = await run_checks(open_dir, quota=2)
    assert max_overlap(stamps) == 2  # measured by the commands themselves: the quota, and all of it
    assert len(stamps.read_text().splitlines()) == 2 * 7
    failed = {sid for sid, o in outcomes.items() if o is not None and o["outcome"] == "failed"}
    assert failed == {f"{RUN}.s00006"}  # the change that added FAIL, and no other
    assert sum(o["outcome"] == "passed" for o in outcomes.values() if o) == 6
    assert all(o and o["duration_s"] >= SLEEP and o["change_seq"] == 3 for o in outcomes.values())
    # the ones that queued behind the quota waited, measured from their submission
    waits = sorted(o["wait_s"] for o in outcomes.values() if o)
    assert waits[:2] == pytest.approx([0, 0], abs=0.3) and waits[-1] >= 2 * SLEEP
    # one check event per change, in the change's own session log
    assert sorted(e.session_id for e in recorded) == sorted(outcomes)


async def test_a_queue_without_a_checks_quota_runs_every_check_at_once(open_dir: Path) -> None:
    outcomes, stamps, _ = await run_checks(open_dir, quota=None, n=4, barrier=True)
    assert max_overlap(stamps) == 5
    assert all(o is not None and o.get("bounded") is False for o in outcomes.values())
