"""A run's progress on stderr: sessions done/active/queued, tokens, cost, error rate.

``--progress`` picks how: ``rich`` (a live bar, redrawn four times a second), ``plain`` (one line every
``FLEET_PROGRESS_EVERY`` seconds, default 5: for logs, CI and anything that is not a terminal) or
``none``. The default, ``auto``, is ``rich`` on a terminal and ``plain`` elsewhere, so a run whose
stderr is redirected still says how it goes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agent_fleet.engine import Engine
from agent_fleet.errors import UsageError

__all__ = ["MODES", "live_progress", "progress_mode"]

MODES = ("auto", "plain", "rich", "none")
DEFAULT_EVERY_S = 5.0


def progress_mode(mode: str, *, tty: bool) -> str:
    """The mode a ``--progress`` value stands for on this stderr; UsageError for an unknown one."""
    if mode not in MODES:
        raise UsageError(f"--progress must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "auto":
        return "rich" if tty else "plain"
    return mode


def _every() -> float:
    raw = os.environ.get("FLEET_PROGRESS_EVERY", "")
    try:
        value = float(raw) if raw else DEFAULT_EVERY_S
    except ValueError:
        raise UsageError(f"FLEET_PROGRESS_EVERY must be a number of seconds, not {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise UsageError(f"FLEET_PROGRESS_EVERY must be a positive number of seconds, not {raw!r}")
    return value


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
async def live_progress(engine_box: list[Engine], *, mode: str = "auto") -> AsyncIterator[None]:
    """Show progress while the body runs, once ``engine_box`` holds the engine."""
    chosen = progress_mode(mode, tty=sys.stderr.isatty())
    if chosen == "none":
        yield
    elif chosen == "plain":
        async with _plain(engine_box, _every()):
            yield
    else:
        async with _rich(engine_box):
            yield


@asynccontextmanager
async def _plain(engine_box: list[Engine], every: float) -> AsyncIterator[None]:
    started = time.monotonic()

    async def tick() -> None:
        while True:
            await asyncio.sleep(every)
            if not engine_box:
                continue
            done, total, text = _line(engine_box[0])
            elapsed = time.monotonic() - started
            sys.stderr.write(f"agent-fleet: {elapsed:.0f} s · sessions {done}/{total} ended · {text}\n")
            sys.stderr.flush()

    async with asyncio.TaskGroup() as tg:
        ticker = tg.create_task(tick())
        try:
            yield
        finally:
            ticker.cancel()


@asynccontextmanager
async def _rich(engine_box: list[Engine]) -> AsyncIterator[None]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
