"""Results are deduplicated while the run goes: `status` shows a live dedup rate, and a resumed run
does not embed again what it embedded before the crash."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from .conftest import Cli, write_lines


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
    # five calls at a time of half a second each: the run lasts about 20 s, and each look at it below
    # is a process of its own, which a loaded machine takes a second or more to start
    proc = cli.popen("deploy", *args, "--max-concurrency", "5")
    live = None
    run_id = None
    for _ in range(300):
        await asyncio.sleep(0.2)
        assert proc.poll() is None
        if run_id is None:
            _code, runs = cli.json("status")
            run_id = runs["runs"][0]["run_id"] if runs["runs"] else None
            continue
        _code, one = cli.json("status", run_id)
        if 50 <= one.get("dedup", {}).get("raw", 0) < 600:  # results came, and sessions still run
            live = one
            break
    assert live is not None, "no live dedup figures while the run was going"
    assert live["status"] == "running" and live["dedup"]["final"] is False
    assert 0 < live["dedup"]["raw"] < 600 and live["dedup"]["unique"] <= live["dedup"]["raw"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code, final = cli.json("resume", live["run_id"])
    assert code == 0 and final["results_raw"] == 600
    dedup = final["dedup"]
    # what was embedded before the crash came from the run's embedding cache after it
    assert dedup["cache_hits"] > 0
    assert dedup["embedded"] + dedup["cache_hits"] <= dedup["raw"] - dedup["exact_duplicates"]
    _code, after = cli.json("status", live["run_id"])
    assert after["dedup"]["final"] is True and after["dedup"]["unique"] == final["results_unique"]
