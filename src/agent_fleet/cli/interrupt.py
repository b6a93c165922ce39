"""How the CLI stops on SIGTERM or Ctrl-C: resumable, exit 130, one line on stderr.

:func:`install` runs first thing in ``main``, before any heavy import, so a SIGTERM that arrives while
the command is still starting ends it the same way as one that arrives mid-run. Outside the event
loop the signal raises :class:`KeyboardInterrupt`, as Ctrl-C does; inside it
(:func:`agent_fleet.cli.common.run_async`) it cancels the command's task instead, so every task group
unwinds and every write in flight lands.

Only the standard library is imported here.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

__all__ = ["EXIT_INTERRUPTED", "MESSAGE", "install", "requested", "say_interrupted"]

EXIT_INTERRUPTED = 130
MESSAGE = "agent-fleet: interrupted (resumable)"

_said = False
_requested = False


def _terminate(signum: int, frame: object) -> None:
    global _requested
    _requested = True
    raise KeyboardInterrupt


def requested() -> bool:
    """Whether a SIGTERM arrived. The interrupt it raises does not always surface as itself: raised
    while the interpreter is building another exception (an import's fallback, in C), it comes out as
    whatever that code made of it, e.g. a TypeError; raised in a callback whose exceptions the
    interpreter drops (an import lock's weakref callback, a ``__del__``), it is lost altogether. The
    CLI goes by this flag, not the exception."""
    return _requested


def _unraisable(args: Any) -> None:
    """The interpreter's report of an exception it had to drop, except our own interrupt: that one is
    acted on through :func:`requested`, and its traceback is not the one line the user gets."""
    if _requested and isinstance(args.exc_value, KeyboardInterrupt):
        return
    sys.__unraisablehook__(args)


def install() -> None:
    """SIGTERM raises KeyboardInterrupt (SIGINT already does). Safe to call again: an event loop that
    handled SIGTERM itself puts the default back when it closes."""
    signal.signal(signal.SIGTERM, _terminate)
    sys.unraisablehook = _unraisable


def say_interrupted() -> None:
    """The one line an interrupted command prints, once however many layers report it."""
    global _said
    if _said:
        return
    _said = True
    sys.stderr.write(MESSAGE + "\n")
    sys.stderr.flush()
