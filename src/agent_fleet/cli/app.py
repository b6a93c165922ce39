"""The ``agent-fleet`` command: one Typer app; each command group lives in its own module.

``main`` installs the signal handlers before it imports anything heavy, then builds the app. Command
modules import typer and the standard library at the top and everything else (the engine, the stores,
the admission controller, rich) inside the commands that use it, so ``agent-fleet --help`` loads none
of it.
"""

from __future__ import annotations

import os
import sys

from agent_fleet.cli import interrupt

TYPE_CHECKING = False  # see agent_fleet/__init__.py: nothing heavy before main() installs the handlers
if TYPE_CHECKING:
    from typing import Any

    import typer

    app: typer.Typer  # built on first access (module __getattr__ below)

__all__ = ["app", "build_app", "main"]

HELP = "Run many LLM agents as one fleet: decompose, dispatch, aggregate."


def build_app() -> typer.Typer:
    import typer

    from agent_fleet.cli import budget, changes, dashboard, demo, gateway, mcp, queues, review, runs, serve, sim

    # Plain help: rich's help formatter costs more CPU to import than the rest of --help together.
    new = typer.Typer(
        name="agent-fleet",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    for module in (runs, demo, changes, sim, queues, budget, review, gateway, mcp, dashboard, serve):
        module.register(new)
    _full_short_help(new)
    return new


def _full_short_help(app: typer.Typer) -> None:
    """Plain help would cut each command's line in the list to 45 characters: give it the whole first
    paragraph of its help, as the list showed before."""
    for command in app.registered_commands:
        doc = command.help or (command.callback.__doc__ if command.callback is not None else None)
        if command.short_help is None and doc:
            command.short_help = _first_paragraph(doc)
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        text = group.help if isinstance(group.help, str) else sub.info.help
        if not isinstance(group.short_help, str) and isinstance(text, str):  # unset is a typer placeholder
            group.short_help = _first_paragraph(text)
        _full_short_help(sub)


def _first_paragraph(text: str) -> str:
    import inspect

    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


def main() -> None:
    interrupt.install()  # first: a SIGTERM during start-up stops the command the way a later one does
    # OpenBLAS with one thread unless the environment says otherwise, set before numpy loads: it takes a
    # limit only from the main thread (agent_fleet.aggregate.blas), and the embedders spread their work
    # over the CPUs on threads of their own
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        try:
            build_app()()
        except KeyboardInterrupt:  # outside a command (typer turns one inside into exit 130 itself)
            sys.exit(interrupt.EXIT_INTERRUPTED)
        except Exception:
            if interrupt.requested():  # the SIGTERM's interrupt, turned into another error on its way
                sys.exit(interrupt.EXIT_INTERRUPTED)
            raise
    except SystemExit as exc:
        if exc.code == interrupt.EXIT_INTERRUPTED:
            interrupt.say_interrupted()
        raise


def __getattr__(name: str) -> Any:
    if name == "app":  # built on first use: importing this module stays cheap
        value = globals()["app"] = build_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
