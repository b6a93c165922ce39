"""Running git for the changes plane: real git, as a subprocess, with a settled environment.

Every call goes through :func:`git`. The user's configuration still applies where it says what
the files are (LFS and other filters, ``core.autocrlf``), and what would change a patch or a commit
id is settled on the command line (``diff.noprefix``, ``apply.whitespace``, colour …; commits are
written by ``fast-import``, which never signs). Hooks never run (``core.hooksPath=/dev/null``), no
file-system monitor is started (``core.fsmonitor=false``), and ownership checks do not stop the
engine from reading a worktree its sandbox user owns (``safe.directory=*``).

The one exception is :func:`user_git`: ``apply`` acts on the user's checkout as the user, with the
user's configuration (their identity for the merge commit), and only when asked.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from agent_fleet.errors import GitError

__all__ = ["GitError", "git", "git_ok", "user_git"]

_TIMEOUT_S = 600.0
_SETTLED = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "safe.directory=*",
    "-c",
    "core.quotePath=true",
    "-c",
    "i18n.commitEncoding=UTF-8",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "color.ui=never",
    "-c",
    "apply.whitespace=nowarn",  # a patch is carried as it is, never "fixed"
    "-c",
    "gc.auto=0",  # never a background gc in the user's repository from a fleet's many small writes
)
# Variables that would point git elsewhere than the caller says, or change what it writes.
_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
)


_LOCATION = frozenset(_DROP[:8])  # where git looks: the caller says it with -C


def _env(extra: Mapping[str, str] | None, drop: Collection[str] = _DROP) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["LC_ALL"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"  # a question (status) never rewrites an index
    if extra:
        env.update(extra)
    return env


def _run(
    argv: list[str], *, input: bytes | None, env: dict[str, str], check: bool, timeout: float
) -> subprocess.CompletedProcess[bytes]:
    try:
        done = subprocess.run(argv, input=input, capture_output=True, env=env, timeout=timeout, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (it is needed to keep the sessions' code changes)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {_verb(argv)} did not finish in {timeout:.0f} s") from None
    if check and done.returncode != 0:
        raise GitError(f"git {_verb(argv)} failed: {_first_line(done.stderr)}", stderr=done.stderr)
    return done


def git(
    repo: Path | str,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float = _TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo ARGS`` in the settled environment (module docstring). Raises :class:`GitError`
    on a non-zero exit unless ``check`` is false."""
    argv = ["git", *_SETTLED, "-C", str(repo), *args]
    return _run(argv, input=input, env=_env(env), check=check, timeout=timeout)


def git_ok(repo: Path | str, *args: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``git ARGS`` exits 0 (a question, e.g. ``cat-file -e``)."""
    return git(repo, *args, env=env, check=False).returncode == 0


def user_git(
    repo: Path | str, *args: str, check: bool = True, timeout: float = _TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """``git -C repo ARGS`` as the user would run it (their configuration): only for ``apply``."""
    argv = ["git", "-C", str(repo), *args]
    return _run(argv, input=None, env=_env(None, _LOCATION), check=check, timeout=timeout)


def _verb(argv: Sequence[str]) -> str:
    """The subcommand of an argv, for messages (never a path, which may be long)."""
    skip = False
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        if a in ("-c", "-C"):
            skip = True
            continue
        if not a.startswith("-"):
            return a
    return "?"


def _first_line(stderr: bytes) -> str:
    for line in stderr.decode(errors="replace").splitlines():
        text = line.strip().removeprefix("fatal: ").removeprefix("error: ")
        if text:
            return text
    return "no message"
