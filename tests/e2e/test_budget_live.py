"""Pause → raise → resume → finish, from the CLI, on a live run against the simulated provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent_fleet.domain.events import EventType, SessionState
from agent_fleet.session import open_store

from .conftest import Cli, write_lines


async def test_budget_raise_resumes_paused_sessions_of_a_live_run(slow_cli: Cli, tmp_path: Path) -> None:
    cli = slow_cli
    src = write_lines(tmp_path / "urls.txt", 200)
    # 40 sessions through 2 API slots at 0.5 s a call: early sessions reach their second call (and
    # pause: their first call alone costs more than 400 tokens) while later ones still wait.
    proc = cli.popen(
        "deploy",
        "--task",
        "Summarise each page",
        "--input",
        str(src),
        "--agents",
        "40",
        "--budget-tokens",
        "400",
        "--max-concurrency",
        "2",
        "--embedder",
        "lexical",
        "--json",
        FLEET_BASE_URL=cli.base_url,
    )
    run_id = None
    paused = 0
    for _ in range(400):  # read the store directly: a `status` process per poll is slower than the run
        await asyncio.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        async with open_store(cli.store) as log:
            runs = await log.list_runs()
            if not runs:
                continue
            run_id = runs[0].session_id
            paused = sum(r.state is SessionState.PAUSED for r in await log.list_sessions(run_id))
        if paused:
            break
    assert run_id is not None and paused > 0
    raised = cli.run("budget", "raise", run_id, "--tokens", "200000")
    assert raised.returncode == 0, raised.stderr
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err + out
    summary = json.loads(out)
    assert summary["status"] == "completed"
    assert summary["sessions"] == {"completed": 40, "failed": 0, "paused": 0, "other": 0}
    assert summary["results_raw"] == 200
    async with open_store(cli.store) as log:
        first_paused = None
        for rec in await log.list_sessions(run_id):
            kinds = [e.type for e in await log.get_events(rec.session_id)]
            if EventType.SESSION_PAUSED in kinds:
                first_paused = kinds
                break
    assert first_paused is not None
    after = first_paused[first_paused.index(EventType.SESSION_PAUSED) :]
    assert EventType.SESSION_RESUMED in after and after[-1] == EventType.SESSION_COMPLETED
