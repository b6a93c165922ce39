"""Checks inside a run: each change a session records is checked as it arrives, through the run's own
admission controller (a ClusterQueue covering ``fleet.dev/checks`` with a quota of 1), recorded once in
that session's log, counted in ``fleet_checks_total`` and the admission-wait histogram; a change whose
check fails is not merged into ``fleet/RUN``; a resumed run runs no recorded check again.

The sessions are CLI agents that really edit their partition's files in their worktrees (one of them
plants a line the check refuses); capture, branches and merge are the changes plane's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hands_support import have_bwrap

from agent_fleet.domain.events import EventType
from agent_fleet.engine import RunOptions, deploy, resume
from agent_fleet.session import open_store
from agent_fleet.sim.provider import SimConfig, sim_provider_process

pytestmark = pytest.mark.skipif(not have_bwrap() and os.geteuid() != 0, reason="needs a sandbox user")

KEY = "sk-checks-run-" + "77" * 10
QUEUES = """
queues:
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: ci}
    spec:
      namespaceSelector: {}
      resourceGroups:
        - coveredResources: [pods, fleet.dev/checks]
          flavors:
            - name: default
              resources: [{name: pods, nominalQuota: 10}, {name: fleet.dev/checks, nominalQuota: 1}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: LocalQueue
    metadata: {name: default, namespace: default}
    spec: {clusterQueue: ci}
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="fleet-checks-run-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


# Each agent marks its partition's files; the one holding m1.py also plants what the check refuses.
AGENT = (
    'for f in $(cat "$FLEET_PARTITION"); do echo "# reviewed" >> "$f"; done; '
    'if grep -q m1.py "$FLEET_PARTITION"; then echo "BROKEN = True" >> m1.py; fi'
)
CHECK = "sleep 0.3; ! grep -rq BROKEN ."


async def test_changes_are_checked_as_they_arrive_under_the_runs_checks_quota(workdir: Path) -> None:
    repo = workdir / "repo"
    repo.mkdir()
    for i in range(3):
        (repo / f"m{i}.py").write_text(f"M = {i}\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    config = workdir / "fleet.yaml"
    config.write_text(f"hands: {{sandbox_root: {workdir / 'sandboxes'}}}\n" + QUEUES)
    store = f"sqlite:///{workdir / 'fleet.db'}"
    with sim_provider_process(SimConfig(latency=0.05)) as url:
        options = RunOptions(
            task="Review each module",
            input_path=str(repo),
            agents=3,
            provider=url,
            config_path=str(config),
            embedder="lexical",
            out_dir=str(workdir / "out"),
            agent_cmd=AGENT,
            check=CHECK,
        )
        report = await deploy(options, store_url=store, api_key=KEY)
        assert report.status == "completed"
        run_id = report.run_id
        async with open_store(store) as log:
            changes = {e.session_id: e.data for e in await log.events_of_run(run_id, [EventType.CHANGE])}
            checks = await log.events_of_run(run_id, [EventType.CHECK])
        assert len(changes) == 3
        broken = next(sid for sid, c in changes.items() if any(f["path"] == "m1.py" for f in c["files"]))
        outcomes = {e.session_id: e.data["outcome"] for e in checks}
        assert outcomes == {sid: "failed" if sid == broken else "passed" for sid in changes}
        # one fleet.dev/checks at a time: the last of the three queued behind the two others
        waits = sorted(e.data["wait_s"] for e in checks)
        assert waits[-1] >= 2 * 0.3 * 0.9 and all("bounded" not in e.data for e in checks)
        # the failing change stays on its own branch; the two others are merged into the run's
        assert _git(repo, "show", f"fleet/{run_id}:m1.py") == "M = 1\n"
        assert _git(repo, "show", f"fleet/{run_id}:m0.py") == "M = 0\n# reviewed\n"
        assert _git(repo, "show", f"fleet/{run_id}:m2.py") == "M = 2\n# reviewed\n"
        assert report.summary["changes"]["checks"] == {"passed": 2, "failed": 1, "timeout": 0}
        assert report.summary["changes"]["merged"] == 2
        metrics = (workdir / "out" / "metrics.prom").read_text()
        assert f'fleet_checks_total{{outcome="failed",run="{run_id}"}} 1.0' in metrics
        assert f'fleet_checks_total{{outcome="passed",run="{run_id}"}} 2.0' in metrics
        assert f'fleet_check_admission_wait_seconds_count{{run="{run_id}"}} 3.0' in metrics
        assert _git(repo, "status", "--porcelain") == ""  # the user's checkout untouched

        # a resumed run (its sessions re-opened) never runs a recorded check again
        async with open_store(store) as log:
            await log.emit_event(run_id, EventType.RUN_RESUMED, {"owner": {}})
        again = await resume(run_id, store_url=store, api_key=KEY)
        assert again.status == "completed"
        async with open_store(store) as log:
            assert len(await log.events_of_run(run_id, [EventType.CHECK])) == 3
        assert again.summary["changes"]["checks"] == {"passed": 2, "failed": 1, "timeout": 0}
