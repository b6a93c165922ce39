"""Results are deduplicated while the run goes: `status` shows a live dedup rate, and a resumed run
does not embed again what it embedded before the crash."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

from agent_fleet.aggregate.live import snapshot_key
from agent_fleet.session.store import open_store

from .conftest import Cli, write_lines


async def _first_live_figures(db: Path, proc: subprocess.Popen[str]) -> str:
    """The run's id, once its live dedup has counted at least 50 of its 600 results."""
    for _ in range(1200):  # the run makes its store; this reader does not race it for the schema
        if await asyncio.to_thread(db.exists):
            break
        assert proc.poll() is None, proc.communicate()
        await asyncio.sleep(0.05)
    async with open_store(f"sqlite:///{db}") as log:
        for _ in range(1200):
            assert proc.poll() is None, proc.communicate()
            runs = await log.list_runs(limit=1)
            if runs:
                live = await log.get_snapshot(snapshot_key(runs[0].session_id))
                if live is not None and 50 <= live.get("raw", 0) < 600:
                    return runs[0].session_id
            await asyncio.sleep(0.05)
    raise AssertionError("no live dedup figures within a minute")


async def test_live_dedup_rate_and_no_second_embedding_after_a_crash(slow_cli: Cli, tmp_path: Path) -> None:
    cli = slow_cli
    src = write_lines(tmp_path / "urls.txt", 600)
    # every note compared with every other (not kept apart by its page): so that there is embedding to reuse
    args = (
        "--task",
        "Summarise each page",
        "--input",
        str(src),
        "--agents",
        "60",
        "--embedder",
        "lexical",
        "--dedup-scope",
        "global",
    )
    # five calls at a time of half a second each: the run lasts about 20 s. The store is watched from
    # here (a read takes milliseconds); once results have come while sessions still run, the run is
    # frozen with SIGSTOP, so that `status` — a process of its own, which a loaded machine takes
    # seconds to start — looks at a run that is still going, however long it takes.
    proc = cli.popen("deploy", *args, "--max-concurrency", "5")
    run_id = await _first_live_figures(Path(cli.store.removeprefix("sqlite:///")), proc)
    proc.send_signal(signal.SIGSTOP)
    try:
        _code, live = cli.json("status", run_id)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert "dedup" in live, "no live dedup figures while the run was going"
    assert live["status"] == "running" and live["dedup"]["final"] is False
    assert 0 < live["dedup"]["raw"] < 600 and live["dedup"]["unique"] <= live["dedup"]["raw"]
    code, final = cli.json("resume", live["run_id"])
    assert code == 0 and final["results_raw"] == 600
    dedup = final["dedup"]
    # what was embedded before the crash came from the run's embedding cache after it
    assert dedup["cache_hits"] > 0
    assert dedup["embedded"] + dedup["cache_hits"] <= dedup["raw"] - dedup["exact_duplicates"]
    _code, after = cli.json("status", live["run_id"])
    assert after["dedup"]["final"] is True and after["dedup"]["unique"] == final["results_unique"]
