"""Git remotes: an ``--input`` that names one (cloned once into the engine's cache), and ``--push``.

The credential — ``FLEET_GIT_TOKEN`` in the engine's environment, or else the remote's own git
configuration (credential helpers, ``.netrc``) — is used by the engine's own git processes alone.
The token reaches git only through that one process's environment, as an ``http.<url>.extraHeader``
given by ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``: it is never written to a
git config (the clone's ``.git/config`` names the bare URL), never on a command line, and scoped to
the remote's URL. Sandboxes start from a scrubbed environment (:mod:`agent_fleet.hands.isolation`),
so no sandbox ever holds it; git's output is searched for it before a line of it is shown.

Invariants: a URL with a password in it is refused (the credential goes in ``FLEET_GIT_TOKEN``); the
token is sent only over https, or over http to a loopback address; a clone is made in a temporary
directory and renamed into place, so a crash never leaves half a clone in the cache; one engine at a
time updates a cached clone (a lock file beside it).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import ipaddress
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from agent_fleet.errors import GitRemoteError, InputError, UsageError

__all__ = [
    "TOKEN_VAR",
    "RemoteInput",
    "clone_input",
    "check_push_remote",
    "git_env",
    "git_cache_root",
    "parse_remote_input",
    "push_run_branches",
    "run_branches",
]

TOKEN_VAR = "FLEET_GIT_TOKEN"
USER_VAR = "FLEET_GIT_USER"  # the user name sent with the token (default x-access-token, as GitHub wants)
CACHE_VAR = "FLEET_GIT_CACHE"
_TIMEOUT = 600.0
# Variables that would make git print what it sends (headers included) or read another config.
_DROP = ("GIT_TRACE", "GIT_CURL_VERBOSE", "GIT_TRACE_CURL", "GIT_TRACE_PACKET", "GIT_REDACT_COOKIES")


@dataclass(frozen=True, slots=True)
class RemoteInput:
    url: str  # https://HOST/PATH.git, without the ref
    ref: str | None  # a branch, tag or commit; None: the remote's default branch

    def __str__(self) -> str:
        return self.url + (f"#{self.ref}" if self.ref else "")


def parse_remote_input(text: str | None) -> RemoteInput | None:
    """``https://HOST/PATH.git[#REF]`` (or ``http://``) as a remote input; None for anything else
    (a local path). Raises UsageError for a URL that carries a password."""
    if not text or not re.match(r"^https?://", text, re.IGNORECASE):
        return None
    url, _, ref = text.partition("#")
    parts = urlsplit(url)
    if not parts.hostname or not parts.path.rstrip("/").endswith(".git"):
        return None
    if parts.password is not None:
        raise UsageError(f"--input: a git URL must not carry a password; put the token in ${TOKEN_VAR}")
    return RemoteInput(url=url.rstrip("/"), ref=ref or None)


def git_cache_root() -> Path:
    """Where cloned inputs are kept: ``$FLEET_GIT_CACHE``, else ``.fleet/git`` in the working directory."""
    configured = os.environ.get(CACHE_VAR, "").strip()
    return Path(configured) if configured else Path.cwd() / ".fleet" / "git"


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def git_env(url: str | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one of the engine's git processes that talks to ``url``: the token as an
    extra header scoped to that URL (when there is a token and ``url`` is http(s)), no prompts, no
    tracing. Raises UsageError rather than send the token in clear text to another machine."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if not k.startswith(_DROP)}
    env["GIT_TERMINAL_PROMPT"] = "0"  # a refused credential fails at once instead of waiting for a user
    token = source.get(TOKEN_VAR, "").strip()
    if not token or url is None:
        return env
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        return env  # ssh and the like: the remote's own configuration
    if parts.scheme.lower() == "http" and not _loopback(parts.hostname):
        raise UsageError(f"refusing to send ${TOKEN_VAR} over plain http to {parts.hostname}; use https")
    user = source.get(USER_VAR, "").strip() or "x-access-token"
    basic = base64.b64encode(f"{user}:{token}".encode()).decode()
    n = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    env["GIT_CONFIG_COUNT"] = str(n + 1)
    env[f"GIT_CONFIG_KEY_{n}"] = f"http.{url}.extraHeader"
    env[f"GIT_CONFIG_VALUE_{n}"] = f"Authorization: Basic {basic}"
    return env


def _scrub(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the token (and its header form) replaced: git never prints it, and if it ever
    did, no line of ours would carry it."""
    source = os.environ if environ is None else environ
    token = source.get(TOKEN_VAR, "").strip()
    if token:
        text = text.replace(token, "***")
    return re.sub(r"(?i)(authorization:\s*\w+\s+)\S+", r"\1***", text)


def _reason(stderr: str) -> str:
    """git's reason, in one line: its last ``fatal:``/``error:`` line, else its last line."""
    if "could not read Username" in stderr or "Authentication failed" in stderr:
        return f"the remote refused the credential (${TOKEN_VAR}, or the remote's own git configuration)"
    lines = [ln.strip() for ln in _scrub(stderr).splitlines() if ln.strip()]
    for line in reversed(lines):
        for prefix in ("fatal: ", "error: ", "remote: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)
    return lines[-1] if lines else "git failed"


def _git(args: list[str], *, cwd: Path | None, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _shown(url: str) -> str:
    """The URL as shown in messages: without any user name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def clone_input(remote: RemoteInput, cache: Path | None = None) -> Path:
    """Clone ``remote`` into the cache (or fetch into the clone already there), check out its ref
    (detached) and return the clone's directory, which the run then works on. Raises GitRemoteError
    (exit 4) when the remote cannot be reached or refuses, InputError (exit 2) for a ref it does not
    have. Runs git: call it off the event loop."""
    root = cache or git_cache_root()
    key = hashlib.sha256(remote.url.encode()).hexdigest()[:16]
    name = Path(urlsplit(remote.url).path).name.removesuffix(".git") or "repo"
    dest = root / f"{name}-{key}"
    env = git_env(remote.url)
    with _locked(root / f"{name}-{key}.lock"):
        if (dest / ".git").is_dir():
            done = _git(["fetch", "--prune", "--tags", "--force", "origin"], cwd=dest, env=env)
            if done.returncode != 0:
                raise GitRemoteError(f"cannot fetch {_shown(remote.url)}: {_reason(done.stderr)}")
        else:
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
            try:
                done = _git(["clone", "--quiet", "--no-checkout", remote.url, str(tmp / "repo")], cwd=None, env=env)
                if done.returncode != 0:
                    raise GitRemoteError(f"cannot clone {_shown(remote.url)}: {_reason(done.stderr)}")
                os.replace(tmp / "repo", dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        commit = _resolve(dest, remote)
        done = _git(["checkout", "--quiet", "--detach", "--force", commit], cwd=dest, env=env)
        if done.returncode != 0:
            raise GitRemoteError(f"cannot check out {remote}: {_reason(done.stderr)}")
    return dest


def _resolve(clone: Path, remote: RemoteInput) -> str:
    env = git_env(None)
    wanted = [f"refs/remotes/origin/{remote.ref}", f"refs/tags/{remote.ref}", remote.ref] if remote.ref else []
    if not remote.ref:
        wanted = ["refs/remotes/origin/HEAD"]
    for name in wanted:
        done = _git(["rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], cwd=clone, env=env)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    if remote.ref:
        raise InputError(f"--input: {_shown(remote.url)} has no branch, tag or commit {remote.ref!r}")
    raise InputError(f"--input: {_shown(remote.url)} has no default branch; name one with #REF")


def run_branches(repo: Path, run_id: str) -> list[str]:
    """The run's branches in ``repo`` (full ref names): ``fleet/RUN_ID``, and every branch under
    ``fleet/`` named by the run id and a separator (``fleet/RUN_ID/…``, ``fleet/RUN_ID-…``, …). Run ids
    have one fixed length, so no run's branches are another's."""
    done = _git(["for-each-ref", "--format=%(refname)", "refs/heads/fleet/"], cwd=repo, env=git_env(None))
    if done.returncode != 0:
        return []
    prefix = f"refs/heads/fleet/{run_id}"
    refs = done.stdout.splitlines()
    return sorted(r for r in refs if r == prefix or (r.startswith(prefix) and r[len(prefix)] in "/.-_"))


def _remote_url(repo: Path, remote: str) -> str | None:
    """The URL ``remote`` stands for: itself when it is a URL, else the named remote's push URL."""
    if "://" in remote:
        return remote
    done = _git(["remote", "get-url", "--push", remote], cwd=repo, env=git_env(None))
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def check_push_remote(repo: Path, remote: str) -> str:
    """The URL ``--push`` names, checked before anything runs: a URL without a password, or a remote of
    ``repo``; the token is never to go over plain http to another machine. Raises UsageError (exit 2)."""
    if "://" in remote and urlsplit(remote).password is not None:
        raise UsageError(f"--push: a git URL must not carry a password; put the token in ${TOKEN_VAR}")
    url = _remote_url(repo, remote)
    if url is None:
        raise UsageError(f"--push: {remote!r} is neither a URL nor a remote of the repository {repo}")
    git_env(url)  # raises rather than plan to send the token in clear text
    return url


def push_run_branches(repo: Path, remote: str, run_id: str) -> list[str]:
    """Push the run's branches (``fleet/RUN_ID`` and ``fleet/RUN_ID/*``) from ``repo`` to ``remote``
    (a remote's name or a URL) and return their names. Raises GitRemoteError (exit 4) when the remote
    cannot be reached or refuses; the branches stay in ``repo`` either way. Runs git: call it off the
    event loop."""
    refs = run_branches(repo, run_id)
    if not refs:
        return []
    url = _remote_url(repo, remote)
    shown = _shown(url) if url and "://" in url else remote
    if url is None:
        raise UsageError(f"--push: {remote!r} is neither a URL nor a remote of {repo}")
    specs = [f"{ref}:{ref}" for ref in refs]
    done = _git(["push", "--porcelain", remote, *specs], cwd=repo, env=git_env(url))
    if done.returncode != 0:
        raise GitRemoteError(
            f"push of run {run_id}'s branches to {shown} failed: {_reason(done.stderr + done.stdout)}; "
            f"they stay in {repo} (`agent-fleet apply {run_id} --push {remote}` pushes them again)"
        )
    return [ref.removeprefix("refs/heads/") for ref in refs]
