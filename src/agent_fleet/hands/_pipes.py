"""A sandboxed command's pipes: capped capture, feeding stdin, killing its process group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, field

__all__ = ["Capture", "kill_group", "read_fd", "write_fd"]


@dataclass(slots=True)
class Capture:
    cap: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    truncated: bool = False

    def feed(self, data: bytes) -> None:
        room = self.cap - self.size
        if room <= 0:
            self.truncated = self.truncated or bool(data)
            return
        if len(data) > room:
            data, self.truncated = data[:room], True
        self.chunks.append(data)
        self.size += len(data)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")


async def read_fd(fd: int, into: Capture) -> None:
    """Read a pipe to EOF into ``into``; closes the fd, also when cancelled."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except BaseException:
        pipe.close()
        raise
    try:
        while chunk := await reader.read(65536):
            into.feed(chunk)
    finally:
        transport.close()


async def write_fd(fd: int, data: bytes) -> None:
    """Write ``data`` to a pipe and close it; a reader that went away is not an error."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    try:
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, pipe)
    except BaseException:
        pipe.close()
        raise
    transport.write(data)
    transport.close()  # flushes what is buffered, then closes; aborted if the reader is gone


def kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)
