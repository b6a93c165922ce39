"""Before a CLI run: what the agent command needs to see in the sandbox, and whether it can start there.

:func:`program_paths` finds the command's program on this host and what it runs on: the program, the
interpreter its ``#!`` line names (through ``/usr/bin/env``), and the installation each lives in —
the ``node_modules`` directory an npm package sits in, the virtualenv a script belongs to (and the
Python that virtualenv was made from), else the directory above ``bin/``. :func:`visible_roots` is
the part of that outside the system directories a bubblewrap sandbox always shows: the sandboxes of a
CLI run bind them read-only.

:func:`check_agent_command` then provisions one sandbox and checks there, as the sandbox's user, that
each program is executable and that a Python or Node interpreter starts. A command that cannot start
is a :class:`~agent_fleet.errors.UsageError` naming the program and the reason (exit code 2, before
anything is recorded) instead of every session failing with exit code 126 or 127.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from agent_fleet.errors import UsageError
from agent_fleet.hands.resources import ResourceSpec
from agent_fleet.hands.sandbox import SandboxError, SandboxProvider

__all__ = ["check_agent_command", "program_paths", "visible_roots"]

_SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/")
_SHELL_WORDS = frozenset(
    {"cd", "export", "exec", "env", "if", "for", "while", "case", "set", "test", "[", "{", "(", "!", "time", "nice"}
)
_CHECK_TIMEOUT = 60.0


def _first_program(command: str) -> str | None:
    """The program a shell command line starts with (after ``VAR=value`` words); None when the line
    starts with shell syntax this check does not follow."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        if "=" in word and not word.startswith(("/", ".")) and word.split("=", 1)[0].isidentifier():
            continue
        if word in _SHELL_WORDS or any(c in word for c in "$`|;&<>(){}*?"):
            return None
        return word
    return None


def _shebang(path: Path) -> list[str]:
    try:
        with path.open("rb") as f:
            head = f.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    line = head[2:].split(b"\n", 1)[0].decode(errors="replace")
    return line.split()


def program_paths(command: str) -> list[str]:
    """The program ``command`` runs and the interpreter chain under it, as absolute host paths."""
    word = _first_program(command)
    if word is None:
        return []
    found = shutil.which(word)
    if found is None:
        raise UsageError(f"--agent-cmd: {word}: command not found")
    chain = [os.path.abspath(found)]
    for _ in range(3):  # a script whose interpreter is a script, at most this deep
        parts = _shebang(Path(chain[-1]))
        if not parts:
            break
        interp = parts[0]
        if os.path.basename(interp) == "env":
            rest = [p for p in parts[1:] if not p.startswith("-")]
            resolved = shutil.which(rest[0]) if rest else None
            if resolved is None:
                break
            interp = resolved
        chain.append(interp)
    return chain


def _install_root(path: str) -> list[str]:
    """The installation a program belongs to, as directories to bind."""
    real = Path(os.path.realpath(path))
    for parent in [real.parent, *real.parents]:
        if parent.name == "node_modules":
            return [str(parent)]
        cfg = parent / "pyvenv.cfg"
        if cfg.is_file():
            roots = [str(parent)]
            for line in cfg.read_text(errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    roots.append(str(Path(value.strip()).parent))
            return roots
    top = real.parent.parent if real.parent.name == "bin" else real.parent
    return [str(top)]


def visible_roots(command: str) -> tuple[str, ...]:
    """Host directories (outside the system ones) the command's programs need to be visible."""
    roots: dict[str, None] = {}
    for p in program_paths(command):
        for candidate in (p, os.path.realpath(p)):
            if not candidate.startswith(_SYSTEM):
                for root in _install_root(candidate):
                    if not root.startswith(_SYSTEM) and root != "/":
                        roots[root] = None
    return tuple(roots)


def _probe(chain: list[str]) -> str:
    lines = []
    for p in chain:
        q = shlex.quote(p)
        lines.append(f'[ -x {q} ] || {{ echo "{p}: not found or not executable here"; exit 126; }}')
    interp = chain[-1] if len(chain) > 1 else ""
    name = os.path.basename(interp)
    if name.startswith("python"):
        lines.append(f"{shlex.quote(interp)} -c pass || exit 126")
    elif name in ("node", "nodejs"):
        lines.append(f"{shlex.quote(interp)} -e 0 || exit 126")
    return "\n".join(lines)


async def check_agent_command(
    command: str, provider: SandboxProvider, resources: ResourceSpec, *, isolation: str = ""
) -> None:
    """Raise :class:`UsageError` unless the command's programs can start inside a sandbox."""
    chain = program_paths(command)
    if not chain:
        return
    try:
        box = await provider.provision(resources, session_id="agent-cmd-check", allow_network=False)
    except SandboxError as exc:
        raise UsageError(f"--agent-cmd: no sandbox to check it in: {exc}") from None
    try:
        run = await box.run(["/bin/sh", "-c", _probe(chain)], timeout=_CHECK_TIMEOUT)
    finally:
        await box.aclose()
    if run.ok:
        return
    said = " ".join((run.stdout + " " + run.stderr).split())[-400:]
    where = f" ({isolation})" if isolation else ""
    raise UsageError(f"--agent-cmd cannot start inside the sandbox{where}: {said or f'exit code {run.exit_code}'}")
