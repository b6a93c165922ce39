"""A SIGTERM that lands while the CLI is still importing ends it as any SIGTERM does: exit 130, one line.

The interrupt the signal raises does not always reach ``main`` as itself: raised while the interpreter
builds another exception (``ssl``'s ``from _ssl import RAND_egd`` fallback, in C), it surfaces as a
``TypeError: expected a message argument``; raised in a callback whose exceptions the interpreter drops
(an import lock's weakref callback), it is lost, and the run went on to the end with exit 0. These
tests stand in for such imports.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest
import typer

from agent_fleet.cli import app, interrupt
from agent_fleet.cli.common import run_async


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(interrupt, "_requested", False, raising=False)
    monkeypatch.setattr(interrupt, "_said", False)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # install() sets its own
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def _import_mangled_by_sigterm() -> None:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a point where the handler surely ran
    except KeyboardInterrupt as exc:
        raise TypeError("expected a message argument") from exc


def test_an_interrupt_turned_into_another_error_still_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(app, "build_app", _import_mangled_by_sigterm)
    with pytest.raises(SystemExit) as exc:
        app.main()
    assert exc.value.code == interrupt.EXIT_INTERRUPTED
    assert capsys.readouterr().err.splitlines() == [interrupt.MESSAGE]


def test_the_same_error_without_a_sigterm_is_not_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise TypeError("a real bug")

    monkeypatch.setattr(app, "build_app", broken)
    with pytest.raises(TypeError, match="a real bug"):
        app.main()


class _DropsItsErrors:
    """Its ``__del__`` gets the signal: the interpreter reports an error there and goes on."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a point where the handler surely ran


def test_an_interrupt_the_interpreter_dropped_still_stops_the_command_before_it_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    interrupt.install()
    _DropsItsErrors()  # collected at once; the KeyboardInterrupt raised in it goes nowhere
    assert interrupt.requested()
    ran: list[str] = []

    async def command() -> None:
        ran.append("the run")

    with pytest.raises(typer.Exit) as exc:
        run_async(command())
    assert exc.value.exit_code == interrupt.EXIT_INTERRUPTED
    assert ran == []
    assert capsys.readouterr().err.splitlines() == [interrupt.MESSAGE]  # no "Exception ignored" report


def test_without_a_sigterm_the_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    interrupt.install()

    async def command() -> str:
        return "done"

    assert run_async(command()) == "done"
    assert capsys.readouterr().err == ""
