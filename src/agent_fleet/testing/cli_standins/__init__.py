"""Scripted stand-ins for external coding CLIs, for tests and demos of ``--agent-cmd``.

Each script reads its partition like a real CLI would be told to (``FLEET_TASK``,
``FLEET_PARTITION``), makes real model calls through the gateway with the official SDK the real
tool uses (Anthropic for ``claude_code``, OpenAI for the others), and prints exactly the output
format of the tool it stands in for:

* ``claude_code.py -p TASK --output-format json`` — Claude Code's result object;
* ``codex.py exec --json TASK`` — Codex's JSONL events (``turn.completed`` with usage);
* ``aider.py --message TASK --analytics-log FILE`` — aider's analytics log plus its stdout;
* ``jsonl_agent.py`` — the generic format: one result item per line.

Options common to all: ``--calls N`` model calls (default 1), ``--hang`` (never exit after the
first call), ``--crash`` (die by SIGKILL after the first call). The scripts import nothing from
this package, so they run in any sandbox that can see this directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["STANDINS", "standin_command"]

STANDINS = {
    "claude": ("claude_code.py", "-p {task} --output-format json"),
    "codex": ("codex.py", "exec --json {task}"),
    "aider": ("aider.py", "--message {task} --analytics-log {analytics_log}"),
    "jsonl": ("jsonl_agent.py", "{task} {partition}"),
}


def standin_command(fmt: str, *extra: str, python: str | None = None) -> str:
    """An ``--agent-cmd`` that runs the stand-in for ``fmt`` (claude, codex, aider, jsonl)."""
    script, args = STANDINS[fmt]
    path = Path(__file__).with_name(script)
    return " ".join([python or sys.executable, str(path), args, *extra])
