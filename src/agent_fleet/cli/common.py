"""What every command shares: error reporting with SPEC.md exit codes, JSON output, store option."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

import typer

from agent_fleet.errors import FleetError

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


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # before the event loop runs: stop the way Ctrl-C does


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; FleetErrors become one line and their exit code, never a traceback.

    SIGTERM stops a run the way Ctrl-C does (resumable, exit 130): while the event loop runs it
    cancels the command's task, so every task group unwinds and every write in flight lands — a
    KeyboardInterrupt raised at an arbitrary point would leave some task holding it.
    """
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
        return await coro

    signal.signal(signal.SIGTERM, _terminate)
    try:
        return asyncio.run(main())
    except FleetError as exc:
        die(str(exc) or type(exc).__name__, exc.exit_code)
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        if isinstance(exc, asyncio.CancelledError) and not terminated:
            raise
        typer.echo("agent-fleet: interrupted (resumable)", err=True)
        raise typer.Exit(130) from None
    except OSError as exc:
        if os.environ.get("FLEET_DEBUG"):
            raise
        die(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc), 2)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
