"""Process isolation helpers: scrubbed environments, rlimits, bubblewrap, owner markers.

What a sandboxed process gets, by mode:

* **bubblewrap** (``bwrap`` on PATH and working): new user, pid, ipc, uts and (unless network is
  allowed) network namespaces; a read-only root built from the system directories (``/usr``,
  the dynamic-linker config and CA certificates from ``/etc``, the Python installation) plus a
  private ``/tmp``; the workspace is the only writable host path; no capabilities; the sandbox dies
  with its parent. Other processes' ``/proc/*/environ`` are invisible (own pid namespace), and
  host files outside the binds do not exist inside.
* **without bubblewrap**: a new session (process group), rlimits, a scrubbed environment and the
  workspace as working directory. When the engine runs as root, the process drops to an
  unprivileged uid (``nobody`` by default), so root-owned files and other users' ``/proc/*/environ``
  are unreadable. When the engine runs as an ordinary user, the sandbox shares that user: the
  engine makes itself non-dumpable so its own ``/proc/<pid>/environ`` is unreadable, but files the
  user can read stay readable. Install bubblewrap for real isolation.

``RLIMIT_NPROC`` counts every process of the sandbox's real uid and is not enforced for processes
that map to host root (bubblewrap run by root); there the pid namespace and the wall-clock kill bound
what a fork bomb can do.

Limits and the parent-death kill are applied by an exec shim in front of the command (util-linux
``setpriv --pdeathsig KILL`` and ``prlimit`` where they work, else a few lines of ``python -I -S``),
and the uid/gid drop by ``subprocess``'s own ``user=``/``group=``/``extra_groups=``: no Python code
runs between ``fork`` and ``exec``, which is not safe in a process that has threads.

Every process the hands start carries ``FLEET_OWNER=<pid>:<start time>`` of the engine process
(and sandboxes ``FLEET_SANDBOX_ID``), so the reaper can find and kill leftovers of an owner that
died, even ones that left their process group.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "OWNER_VAR",
    "SANDBOX_VAR",
    "BwrapOptions",
    "ExecShim",
    "ProcessLimits",
    "bwrap_argv",
    "bwrap_path",
    "exec_shim",
    "forbidden_values",
    "is_credential_name",
    "isolation_note",
    "kill_marked",
    "make_parent_undumpable",
    "owner_alive",
    "owner_token",
    "process_env",
    "scan_marked",
    "scrub_env",
]

OWNER_VAR = "FLEET_OWNER"
SANDBOX_VAR = "FLEET_SANDBOX_ID"

# Names a credential hides behind. Matching is on the upper-cased name.
_CRED_RE = re.compile(
    r"(KEY|TOKEN|SECRET|PASSW|PWD$|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT|DSN|SIGNATURE|_PASS$)"
    r"|^(AWS|AZURE|GCP|GCLOUD|GOOGLE|GH|GITHUB|GITLAB|OPENAI|ANTHROPIC|HF|HUGGING|CLAUDE|CODEX|DOCKER|NPM|PYPI"
    r"|TWINE|SLACK|STRIPE|DATABASE|PG|MYSQL|REDIS|MONGO|VAULT|KUBE|SSH|GPG|NETRC)[A-Z0-9]*(_|$)"
)
# The only variables a sandbox inherits from the engine; everything else comes from the caller.
_INHERIT = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM")


def is_credential_name(name: str) -> bool:
    return bool(_CRED_RE.search(name.upper()))


def forbidden_values(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Values of the engine's credential-named variables: these never enter a sandbox."""
    env = os.environ if environ is None else environ
    return frozenset(v for k, v in env.items() if is_credential_name(k) and len(v) >= 8)


def scrub_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed, credential-free part of ``environ``."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in _INHERIT if k in env and not is_credential_name(k)}


def process_env(
    *, home: str, tmpdir: str, extra: Mapping[str, str] | None, markers: Mapping[str, str]
) -> dict[str, str]:
    """The full environment of a sandboxed process. Raises ValueError if ``extra`` smuggles a
    value equal to one of the engine's credentials (a provider key must never enter a sandbox)."""
    env = scrub_env()
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"HOME": home, "TMPDIR": tmpdir, "PYTHONDONTWRITEBYTECODE": "1"})
    if extra:
        bad = forbidden_values()
        for k, v in extra.items():
            if v in bad:
                raise ValueError(f"refusing to pass a credential of the engine into a sandbox (variable {k})")
        env.update(extra)
    env.update(markers)
    return env


# -- owner identity ---------------------------------------------------------------------------
def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may contain spaces and parentheses: fields start after the last ')'
    return stat.rsplit(")", 1)[1].split()[19]


def owner_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid) or '0'}"


def owner_alive(token: str) -> bool:
    pid_s, _, start = token.partition(":")
    try:
        pid = int(pid_s)
    except ValueError:
        return False
    now = _start_time(pid)
    return now is not None and now == start


def _environ_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for part in raw.split(b"\0"):
        k, sep, v = part.partition(b"=")
        if sep and k in (OWNER_VAR.encode(), SANDBOX_VAR.encode()):
            out[k.decode()] = v.decode(errors="replace")
    return out


def scan_marked() -> Iterator[tuple[int, dict[str, str]]]:
    """(pid, markers) for every visible process that carries a fleet marker."""
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me:
            continue
        marks = _environ_of(pid)
        if marks:
            yield pid, marks


def kill_marked(match: Callable[[dict[str, str]], bool]) -> list[int]:
    """SIGKILL every marked process (and its group) whose markers satisfy ``match``."""
    killed: list[int] = []
    for pid, marks in scan_marked():
        if not match(marks):
            continue
        with contextlib.suppress(OSError):
            pgid = os.getpgid(pid)
            if pgid != os.getpgid(0):
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return sorted(killed)


# -- the child side ---------------------------------------------------------------------------
_PR_SET_DUMPABLE = 4


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


def make_parent_undumpable() -> None:
    """Make this process's /proc/<pid>/environ unreadable to same-uid processes (Linux)."""
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessLimits:
    """What a sandboxed command may use; ``nproc`` None leaves RLIMIT_NPROC alone."""

    cpu_seconds: int
    memory: int
    fsize: int
    nproc: int | None = None

    def rlimits(self) -> list[tuple[str, int, int]]:
        """(resource, soft, hard): core dumps off, CPU with one second of SIGXCPU before SIGKILL."""
        out = [
            ("core", 0, 0),
            ("cpu", self.cpu_seconds, self.cpu_seconds + 1),
            ("as", self.memory, self.memory),
            ("fsize", self.fsize, self.fsize),
        ]
        if self.nproc is not None:
            out.append(("nproc", self.nproc, self.nproc))
        return out


# Runs as ``python -I -S -c _SHIM PARENT_PID UID RLIMIT... -- ARGV`` (UID ``-``: keep the user). The
# parent-death signal is set again after a uid change (the kernel clears it on one), and each time
# followed by a check that the parent did not die before it was set.
_SHIM = """import ctypes, os, resource, sys
a = sys.argv
libc = ctypes.CDLL(None)
def die_with_parent():
    libc.prctl(1, 9, 0, 0, 0)
    if os.getppid() != int(a[1]):
        os._exit(137)
die_with_parent()
i = a.index("--")
for spec in a[3:i]:
    name, soft, hard = spec.split(":")
    resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), (int(soft), int(hard)))
if a[2] != "-":
    os.setgroups([])
    os.setgid(int(a[2]))
    os.setuid(int(a[2]))
    die_with_parent()
try:
    os.execvp(a[i + 1], a[i + 1:])
except OSError as exc:
    sys.stderr.write("cannot start the command: %s\\n" % exc.strerror)
    os._exit(127)
"""


@dataclass(frozen=True, slots=True)
class ExecShim:
    """What kills a command with its parent, applies its rlimits and drops its user, before exec.

    :meth:`prepare` returns the argv (a prefix in front of the command) and the extra keyword
    arguments for ``subprocess``/``asyncio.create_subprocess_exec``.
    """

    setpriv: str | None = None  # util-linux, when both it and prlimit work here
    prlimit: str | None = None
    # The interpreter itself, not a virtualenv's link to it; it starts as the engine's user and
    # drops to ``uid`` itself, so it need not be reachable by the sandbox user.
    python: str = os.path.realpath(sys.executable)

    @property
    def kind(self) -> str:
        return "util-linux" if self.setpriv and self.prlimit else "python"

    def prepare(
        self, limits: ProcessLimits, command: Sequence[str], *, uid: int | None = None
    ) -> tuple[list[str], dict[str, Any]]:
        if self.setpriv and self.prlimit:
            opts = [f"--{name}={soft}:{hard}" for name, soft, hard in limits.rlimits()]
            argv = [self.setpriv, "--pdeathsig", "KILL", "--", self.prlimit, *opts, "--", *command]
            # subprocess drops the user in C between fork and exec; setpriv then runs as that user.
            drop: dict[str, Any] = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
            return argv, drop
        specs = [f"{name}:{soft}:{hard}" for name, soft, hard in limits.rlimits()]
        who = "-" if uid is None else str(uid)
        return [self.python, "-I", "-S", "-c", _SHIM, str(os.getpid()), who, *specs, "--", *command], {}


@cache
def exec_shim() -> ExecShim:
    """util-linux ``setpriv`` + ``prlimit`` if they are installed and work here, else the Python shim."""
    setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
    if setpriv is None or prlimit is None:
        return ExecShim()
    probe = [setpriv, "--pdeathsig", "KILL", "--", prlimit, "--core=0:0", "--", "true"]
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return ExecShim(setpriv, prlimit) if ok else ExecShim()


# -- bubblewrap -------------------------------------------------------------------------------
@cache
def bwrap_path() -> str | None:
    """The bwrap binary if it is installed and can create its namespaces here."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        probe = subprocess.run(
            [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/gitconfig",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BwrapOptions:
    workdir: str
    allow_network: bool = False
    uid: int = 65534
    gid: int = 65534
    ro_paths: tuple[str, ...] = ()


def _python_paths() -> list[str]:
    """The Python installation, and this package's own directory (source code only, no data):
    enough to run Python tools and the bundled CLI stand-ins inside the sandbox."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(str(Path(__file__).resolve().parents[1]))
    return sorted(p for p in paths if p and not p.startswith("/usr"))


def bwrap_argv(bwrap: str, opts: BwrapOptions, command: Iterable[str]) -> list[str]:
    argv = [bwrap, "--unshare-all", "--unshare-user", "--uid", str(opts.uid), "--gid", str(opts.gid)]
    if opts.allow_network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        p = Path(top)
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            argv += ["--ro-bind", top, top]
    for etc in _ETC:
        argv += ["--ro-bind-try", etc, etc]
    # The private /tmp first: a Python installation or read-only path under /tmp (a virtualenv in a
    # temporary checkout) is then bound on top of it instead of being hidden by it.
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for extra in (*_python_paths(), *opts.ro_paths):
        argv += ["--ro-bind-try", extra, extra]
    argv += ["--bind", opts.workdir, opts.workdir, "--chdir", opts.workdir, "--remount-ro", "/", "--"]
    argv += list(command)
    return argv


def isolation_note(bwrap: str | None, uid: int | None) -> str:
    if bwrap is not None:
        return "bubblewrap: own namespaces, read-only system root, workspace-only writes, rlimits, scrubbed env"
    if uid is not None:
        return f"no bubblewrap: uid {uid}, rlimits, scrubbed env, own process group; world-readable files stay readable"
    return "no bubblewrap: same user as the engine; rlimits, scrubbed env and own process group only"
