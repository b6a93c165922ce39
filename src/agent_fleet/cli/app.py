"""The ``agent-fleet`` command: one Typer app; each command group lives in its own module."""

from __future__ import annotations

import sys

import typer

from agent_fleet.cli import budget, gateway, queues, runs, sim

__all__ = ["app", "main"]

app = typer.Typer(
    name="agent-fleet",
    help="Run many LLM agents as one fleet: decompose, dispatch, aggregate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in (runs, sim, queues, budget, gateway):
    _module.register(app)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
