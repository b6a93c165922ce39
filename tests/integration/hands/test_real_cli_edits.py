"""The real coding CLIs edit their partitions' files in their own worktrees, with their own edit tools.

Claude Code (``Edit``), Codex CLI (``apply_patch``) and aider (SEARCH/REPLACE blocks) each run as a
fleet of two over a git repository — ``--agent-cmd`` through the run's gateway service against the
simulated provider with edits on (``agent_fleet.sim.coding``: a mechanical fix per finding).
Each session's worktree is read as its sandbox closes: every file of its partition must hold exactly
the simulated model's fixes and every other file be as it was; the changes, captured as the sessions
end, must be merged into the run's branch; the user's working tree and HEAD stay as they were.
Programs are found as in ``test_real_cli_agents``; without them the test skips (fails with
``FLEET_REQUIRE_REAL_CLIS=1``).
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from _hands_support import Snapshots, git_repo
from test_real_cli_agents import AIDER_CMD, CLAUDE_PROMPT, CODEX_CMD, KEY, make_repo, program
from test_real_cli_agents import workdir as workdir  # the fixture

from agent_fleet.config import load_config
from agent_fleet.engine import Engine, RunOptions, plan_run, with_config
from agent_fleet.engine.workforce import Workforce
from agent_fleet.session import open_store
from agent_fleet.sim.detectors import detect
from agent_fleet.sim.fixes import apply_edits, plan_edits
from agent_fleet.sim.provider import SimConfig, SimProvider
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.providers import build_provider

AGENTS = 2


def files_of(top: Path) -> dict[str, bytes]:
    """The working tree's files (the .git directory aside: a run adds branches)."""
    return {
        str(p.relative_to(top)): p.read_bytes()
        for p in sorted(top.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(top).parts
    }


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


async def cli_fleet(where: Path, sim_url: str, cmd: str, fmt: str) -> tuple[Any, dict[str, dict[str, str]], Any]:
    """Run ``cmd`` (``--agent-format fmt``) as a fleet over ``where/repo``: (report, worktrees at close, plan)."""
    config = where / "fleet.yaml"
    config.write_text(f"hands: {{sandbox_root: {where / 'sandboxes'}}}\ndispatch: {{workers: {AGENTS + 2}}}\n")
    options = RunOptions(
        task="Review these files for bugs.",
        input_path=str(where / "repo"),
        agents=AGENTS,
        provider=sim_url,
        out_dir=str(where / "out"),
        config_path=str(config),
        embedder="lexical",
        agent_cmd=cmd,
        agent_format=fmt,
    )
    options = with_config(options, load_config(config))
    plan = plan_run(options)
    run_id = f"run-{fmt}"
    log = open_store(f"sqlite:///{where / 'fleet.db'}")
    await log.open()
    provider = build_provider(sim_url, api_key=KEY, model=options.model)
    gateway = Gateway(provider, session_tokens=10_000_000, run_id=run_id)  # the CLIs' prompts are large
    snaps: list[Snapshots] = []

    def wrap(inner: Any) -> Any:
        snaps.append(Snapshots(inner))
        return snaps[-1]

    workforce = await Workforce.open(
        run_id=run_id,
        config_path=str(config),
        gateway=gateway,
        log=log,
        agent_cmd=cmd,
        agent_format=fmt,
        timeout=300,
        wrap_sandboxes=wrap,
    )
    engine = Engine(log=log, gateway=gateway, workforce=workforce)
    try:
        await engine.create_run(plan, options, run_id=run_id)
        await engine.dispatch(run_id, plan, options)
        report = await engine.aggregate(run_id, options)
    finally:
        await engine.shutdown()
    return report, snaps[0].at_close, plan


def test_claude_code_codex_and_aider_edit_files_of_their_partitions_in_their_worktrees(workdir: Path) -> None:
    cmds = {
        # Claude Code in -p mode asks before an edit and nobody is there to answer: edits are accepted
        "claude": f"{program('FLEET_TEST_CLAUDE', 'npm/node_modules/.bin/claude')} -p {CLAUDE_PROMPT} "
        "--output-format json --permission-mode acceptEdits",
        "codex": CODEX_CMD.replace("{codex}", program("FLEET_TEST_CODEX", "npm/node_modules/.bin/codex")),
        "aider": AIDER_CMD.replace("{aider}", program("FLEET_TEST_AIDER", "aider/bin/aider")),
    }
    sources: dict[str, dict[str, str]] = {}
    before: dict[str, dict[str, bytes]] = {}
    for fmt in cmds:
        sources[fmt] = make_repo(workdir / fmt / "repo", 2 * AGENTS, padding=5)
        git_repo(workdir / fmt / "repo", {})  # committed: the sessions work in worktrees of it
        before[fmt] = files_of(workdir / fmt / "repo")
        assert git(workdir / fmt / "repo", "rev-parse", "HEAD")

    async def all_of_them() -> list[tuple[Any, dict[str, dict[str, str]], Any]]:
        async with SimProvider(SimConfig(latency=0.01, edits=True)) as sim:
            fleets = (cli_fleet(workdir / fmt, sim.base_url, cmd, fmt) for fmt, cmd in cmds.items())
            return list(await asyncio.gather(*fleets))

    for fmt, (report, at_close, plan) in zip(cmds, asyncio.run(all_of_them()), strict=True):
        assert report.status == "completed" and report.summary["sessions"]["completed"] == AGENTS, (fmt, report)
        src = sources[fmt]
        fixed = {p: apply_edits(t, plan_edits(p, t, detect(p, t))) for p, t in src.items()}
        assert all(fixed[p] not in (None, src[p]) for p in src)
        for part in plan.partitions:
            got = at_close[f"{report.run_id}.s{part.index:05d}"]
            want = {p: (fixed[p] if p in part.items else src[p]) for p in src}
            assert {p: got.get(p) for p in src} == want, (fmt, part.items)
        repo = workdir / fmt / "repo"
        for path in src:  # every change captured and merged into the run's branch
            assert git(repo, "show", f"fleet/{report.run_id}:{path}") == fixed[path], (fmt, path)
        assert files_of(repo) == before[fmt] and git(repo, "status", "--porcelain") == "", fmt  # untouched
