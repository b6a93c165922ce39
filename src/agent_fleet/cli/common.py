"""What every command shares: error reporting with SPEC.md exit codes, JSON output, store option."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

import typer

from agent_fleet.cli import interrupt
from agent_fleet.errors import FleetError, cause_of

__all__ = ["STORE_OPTION", "die", "print_json", "run_async"]

T = TypeVar("T")

STORE_OPTION = typer.Option(
    None,
    "--store",
    help="Session store URL (sqlite:///path or postgresql://…); default $FLEET_STORE or sqlite:///.fleet/fleet.db",
)


def die(message: str, code: int) -> NoReturn:
    """One readable line on stderr, then exit with ``code``."""
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    typer.echo(f"agent-fleet: error: {first}", err=True)
    raise typer.Exit(code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; FleetErrors become one line and their exit code, never a traceback.

    SIGTERM stops a run the way Ctrl-C does (resumable, exit 130): while the event loop runs it
    cancels the command's task, so every task group unwinds and every write in flight lands — a
    KeyboardInterrupt raised at an arbitrary point would leave some task holding it. Before and after
    the loop, :mod:`agent_fleet.cli.interrupt`'s handler raises KeyboardInterrupt.
    """
    import asyncio

    terminated = False

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_term() -> None:
            nonlocal terminated
            terminated = True
            if task is not None:
                task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_term)
        if interrupt.requested():  # arrived before the handler above, its interrupt lost on the way
            on_term()
            coro.close()  # never started: nothing of it to unwind
            raise asyncio.CancelledError
        return await coro

    interrupt.install()
    if interrupt.requested():  # a SIGTERM while the command started, its interrupt dropped somewhere
        coro.close()
        interrupt.say_interrupted()
        raise typer.Exit(interrupt.EXIT_INTERRUPTED)
    try:
        return asyncio.run(main())
    except BaseException as raised:
        if isinstance(raised, (SystemExit, typer.Exit)) or os.environ.get("FLEET_DEBUG"):
            raise
        exc = cause_of(raised)  # a task group's ExceptionGroup stands for its cause
        if isinstance(exc, FleetError):
            die(str(exc) or type(exc).__name__, exc.exit_code)
        if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
            if isinstance(exc, asyncio.CancelledError) and not terminated:
                raise
            interrupt.say_interrupted()
            raise typer.Exit(interrupt.EXIT_INTERRUPTED) from None
        if isinstance(exc, OSError):
            text = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)
            # a full, read-only or failing disk is the machine's state, not the user's input
            die(text, 4 if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO) else 2)
        raise
    finally:
        interrupt.install()  # closing the loop put SIGTERM's default (exit 143, no message) back


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


PROGRESS_HELP = "Progress on stderr: auto (a live bar on a terminal, else plain), plain (a line every 5 s), rich, none."


def progress_option() -> Any:
    """``--progress`` as every command that runs a fleet takes it."""
    return typer.Option("auto", "--progress", help=PROGRESS_HELP)
