"""The live progress bar of a run: sessions done/active/queued, tokens, cost, error rate (stderr, TTY only)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_fleet.engine import Engine

__all__ = ["live_progress"]


def _line(engine: Engine) -> tuple[int, int, str]:
    stats = engine.stats()
    if stats is None:
        return 0, 0, "starting"
    run = engine.gateway.meter.run
    errors = sum(run.errors.values())
    rate = errors / max(1, run.calls + errors)
    text = (
        f"active {stats.active} · queued {stats.queued} · failed {stats.failed} · paused {stats.paused} · "
        f"tokens {run.total_tokens:,} · ${run.cost_usd:.4f} · errors {rate:.1%}"
    )
    return stats.completed + stats.failed + stats.paused, stats.total, text


@asynccontextmanager
async def live_progress(engine_box: list[Engine], *, enabled: bool) -> AsyncIterator[None]:
    """Show progress while the body runs, once ``engine_box`` holds the engine."""
    if not enabled or not sys.stderr.isatty():
        yield
        return
    console = Console(stderr=True)
    columns = (
        TextColumn("[bold]sessions"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("starting", total=None)

        async def refresh() -> None:
            while True:
                if engine_box:
                    done, total, text = _line(engine_box[0])
                    progress.update(task, completed=done, total=total or None, description=text)
                await asyncio.sleep(0.25)

        async with asyncio.TaskGroup() as tg:
            ticker = tg.create_task(refresh())
            try:
                yield
            finally:
                ticker.cancel()
