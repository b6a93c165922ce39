"""Reading and writing files of a session's workspace from the engine, without ever leaving it.

The engine writes into a workspace the agent's own commands also write into, so nothing in it is
trusted: a path component may have become a symbolic link to anywhere. Writes therefore walk the path
one directory at a time from an open descriptor of the workspace root with ``O_NOFOLLOW``, and refuse
a symbolic link anywhere on the way, the file itself included (a write never goes through a link). The
new content goes to a temporary file in the same directory, which then replaces the old one by
``rename``: a reader sees the old file or the new one, never half of either, and a hard link to the
old file is left alone. The file keeps its mode and owner (a new one takes its directory's owner), so
an unprivileged sandbox user can still change what the engine wrote.

Paths are relative POSIX paths; ``..``, absolute paths and empty components are refused before any
system call. Text only: a file with a NUL byte or one that is not UTF-8 is binary, and a file over
``max_bytes`` is too large to edit; both are refused with a reason, never rewritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_EDIT_BYTES",
    "WorkspaceIOError",
    "check_relative",
    "decode_text",
    "read_bytes",
    "write_bytes",
]

MAX_EDIT_BYTES = 2_000_000  # larger files are not rewritten through the tools (one clear error instead)
_BINARY_PROBE = 8192


class WorkspaceIOError(Exception):
    """A file operation refused or failed; ``str()`` is the reason, fit for the model."""


@dataclass(frozen=True, slots=True)
class _Walked:
    dir_fd: int
    name: str


def check_relative(rel: str) -> str:
    """``rel`` as a plain relative path, or :class:`WorkspaceIOError` when it could leave the root."""
    if not rel or "\x00" in rel:
        raise WorkspaceIOError("an empty path or one with a NUL byte")
    if rel.startswith("/") or rel.startswith("\\"):
        raise WorkspaceIOError(f"{rel!r} is absolute; paths are relative to the input root")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise WorkspaceIOError(f"{rel!r} is not a plain relative path (no '..', '.' or empty parts)")
    return rel


def _is_link_error(exc: OSError) -> bool:
    # O_NOFOLLOW on a link: ELOOP; O_DIRECTORY|O_NOFOLLOW on a link to a directory: ENOTDIR
    return exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


@contextlib.contextmanager
def _walk(root: Path, rel: str, *, create_dirs: bool) -> Iterator[_Walked]:
    """The open directory holding ``rel``'s last component, reached without following any link."""
    parts = check_relative(rel).split("/")
    fds: list[int] = []
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fds.append(fd)
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create_dirs:
                    raise WorkspaceIOError(f"{rel!r} does not exist") from None
                parent = os.fstat(fd)
                os.mkdir(part, 0o755, dir_fd=fd)
                with contextlib.suppress(PermissionError):
                    os.chown(part, parent.st_uid, parent.st_gid, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if _is_link_error(exc):
                    where = "/".join(parts[: i + 1])
                    raise WorkspaceIOError(f"{where!r} is a symbolic link or not a directory; refused") from None
                raise
            fds.append(nxt)
            fd = nxt
        yield _Walked(fd, parts[-1])
    finally:
        for f in fds:
            os.close(f)


def read_bytes(root: Path, rel: str, *, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of ``rel`` and its whole size; a link anywhere on the way is refused."""
    with _walk(root, rel, create_dirs=False) as at:
        try:
            fd = os.open(at.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=at.dir_fd)
        except FileNotFoundError:
            raise WorkspaceIOError(f"{rel!r} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspaceIOError(f"{rel!r} is a symbolic link; refused") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceIOError(f"{rel!r} is not a regular file")
            chunks: list[bytes] = []
            left = limit
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks), st.st_size
        finally:
            os.close(fd)


def decode_text(rel: str, data: bytes) -> str:
    """``data`` as text, or :class:`WorkspaceIOError` when it is binary."""
    if b"\x00" in data[:_BINARY_PROBE]:
        raise WorkspaceIOError(f"{rel!r} is a binary file; only text files can be read or edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkspaceIOError(f"{rel!r} is not UTF-8 text; only text files can be read or edited") from None


def write_bytes(root: Path, rel: str, data: bytes) -> bool:
    """Replace (or create) ``rel`` with ``data`` atomically; True when the file is new.

    Invariant: nothing outside ``root`` is opened for writing, and no link is written through.
    """
    if len(data) > MAX_EDIT_BYTES:
        raise WorkspaceIOError(f"{len(data)} bytes is over the {MAX_EDIT_BYTES}-byte limit of one write")
    with _walk(root, rel, create_dirs=True) as at:
        try:
            old: os.stat_result | None = os.stat(at.name, dir_fd=at.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise WorkspaceIOError(f"{rel!r} is a symbolic link; writing through it is refused")
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise WorkspaceIOError(f"{rel!r} is not a regular file")
        owner = old if old is not None else os.fstat(at.dir_fd)
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o644
        tmp = f".{at.name}.fleet-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=at.dir_fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                if (owner.st_uid, owner.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(PermissionError):
                        os.fchown(fd, owner.st_uid, owner.st_gid)
            finally:
                os.close(fd)
            os.rename(tmp, at.name, src_dir_fd=at.dir_fd, dst_dir_fd=at.dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=at.dir_fd)
            raise
        return old is None
