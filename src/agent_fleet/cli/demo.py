"""``agent-fleet demo``: an offline run over the bundled sample codebase that reviews it and changes it.

The sample ships as plain files, and a run makes changes only on a git repository (SPEC.md "Changes"),
so the demo first makes one: a copy of the sample, committed once (a fixed author and date, so the
commit is the same everywhere) at ``.fleet/demo-repo`` beside the default store. Later demos reuse it
while the sample is the same — a run never moves its branch or touches its files, so its ``HEAD``
stays the sample — and make it again when the sample changed. The simulated provider runs with edits
on: each session reports what it finds and fixes what has a mechanical fix, in its own worktree.
Without git on the machine the demo reviews the sample as it is and says so.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from agent_fleet.cli.common import STORE_OPTION, progress_option, run_async

if TYPE_CHECKING:
    from agent_fleet.engine import Engine, RunReport

__all__ = ["SAMPLE", "demo_repository", "register"]

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "demo-repo"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "agent-fleet demo",
    "GIT_AUTHOR_EMAIL": "demo@agent-fleet.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "agent-fleet demo",
    "GIT_COMMITTER_EMAIL": "demo@agent-fleet.invalid",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
}
# No hooks, no signing, no templates or user configuration: the commit depends on the sample alone.
_GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "init.templateDir="]


def _sample_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in SAMPLE.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(SAMPLE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {**_IDENTITY, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([*_GIT, "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=60)


def demo_repository(dest: Path) -> Path | None:
    """A git repository holding the sample at ``dest`` (made if it is missing or holds another sample);
    None when git is not installed."""
    if shutil.which("git") is None:
        return None
    subject = f"agent-fleet demo sample {_sample_digest()}"
    if (dest / ".git").is_dir():
        head = _git(dest, "log", "-1", "--format=%s")
        if head.returncode == 0 and head.stdout.strip() == subject:
            return dest
        shutil.rmtree(dest)
    elif dest.exists():
        shutil.rmtree(dest)
    building = dest.with_name(f"{dest.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(SAMPLE, building, ignore=shutil.ignore_patterns("__pycache__"))
    for step in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", subject)):
        done = _git(building, *step)
        if done.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            raise OSError(f"git {step[0]} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    os.replace(building, dest)  # whole or not at all: a demo killed half-way leaves no half a repository
    return dest


def demo_cmd(
    store: str | None = STORE_OPTION,
    out: str | None = typer.Option(None, "--out", help="Output directory (default .fleet/runs/RUN_ID)."),
    agents: int = typer.Option(12, "--agents"),
    as_json: bool = typer.Option(False, "--json"),
    progress: str = progress_option(),
) -> None:
    """Offline end-to-end run on the bundled sample codebase against the simulated provider: its sessions
    review the code and fix what has a mechanical fix, each in its own worktree of a copy of the sample."""
    from agent_fleet.cli.progress import live_progress
    from agent_fleet.cli.run_output import finish_summary
    from agent_fleet.engine import RunOptions, deploy
    from agent_fleet.sim.provider import LogNormalLatency, SimConfig, SimProvider

    engine_box: list[Engine] = []

    def started(run_id: str, engine: Engine) -> None:
        engine_box.append(engine)
        typer.echo(f"agent-fleet: run {run_id} started", err=True)

    try:
        repo = demo_repository(Path(".fleet") / "demo-repo")
    except OSError as exc:
        typer.echo(
            f"agent-fleet: cannot make the demo's git repository ({exc}); reviewing the sample as it is", err=True
        )
        repo = None
    if repo is None:
        typer.echo("agent-fleet: git is not installed: the demo reviews the sample without changing it", err=True)
    else:
        typer.echo(f"agent-fleet: the demo works on a git copy of the sample: {repo.resolve()}", err=True)
    out_dir = os.path.abspath(out) if out else None

    async def go() -> RunReport:
        latency = LogNormalLatency(median=0.15, sigma=0.5)
        async with SimProvider(SimConfig(latency=latency, seed=7, edits=repo is not None)) as sim:
            options = RunOptions(
                task="Find bugs and risky code, and fix what you safely can",
                input_path=str((repo or SAMPLE).resolve()),
                agents=agents,
                provider=sim.base_url,
                out_dir=out_dir,
            )
            async with live_progress(engine_box, mode=progress):
                return await deploy(options, store_url=store, api_key="sk-demo-offline", on_start=started)

    finish_summary(run_async(go()).summary, as_json)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("demo")(demo_cmd)
