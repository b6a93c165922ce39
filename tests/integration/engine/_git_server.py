"""A real git smart-HTTP server on loopback: Debian's ``git http-backend`` (CGI) behind a small aiohttp
front that demands a token (HTTP Basic, the token as the password; 401 otherwise).

``GitServer(root, token)`` serves the bare repositories under ``root`` at ``http://127.0.0.1:PORT/``;
``refuse_push`` makes it answer every push with 403, as a protected remote does. It runs on its own
event loop in a thread, so in-process engines and CLI subprocesses alike can talk to it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from aiohttp import web

BACKEND = "/usr/lib/git-core/git-http-backend"


def have_backend() -> bool:
    return os.path.exists(BACKEND) and shutil.which("git") is not None


def bare_repo(root: Path, name: str, files: dict[str, str]) -> Path:
    """A bare repository ``root/name.git`` holding one commit of ``files`` on ``main``."""
    work = root / f"{name}-work"
    work.mkdir(parents=True)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-q", "-m", "first"], check=True)
    subprocess.run([*git, "-C", str(work), "tag", "v1"], check=True)
    bare = root / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    shutil.rmtree(work)
    return bare


class GitServer:
    def __init__(self, root: Path, token: str, *, refuse_push: bool = False) -> None:
        self.root = root
        self.token = token
        self.refuse_push = refuse_push
        self.requests: list[dict[str, Any]] = []  # method, path, authorized
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> GitServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                _user, _, password = base64.b64decode(value).decode().partition(":")
            except ValueError:
                return False
            return password == self.token
        return scheme.lower() == "bearer" and value == self.token

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        ok = self._authorized(request)
        service = request.query.get("service", "") or request.path.rsplit("/", 1)[-1]
        self.requests.append({"method": request.method, "path": request.path, "authorized": ok, "service": service})
        if not ok:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'}, text="token required")
        if self.refuse_push and service == "git-receive-pack":
            return web.Response(status=403, text="pushes are not allowed here")
        body = await request.read()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": request.method,
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query_string,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "fleet",  # an authenticated user: http-backend then allows receive-pack
            "REMOTE_ADDR": "127.0.0.1",
        }
        if "Content-Encoding" in request.headers:
            env["HTTP_CONTENT_ENCODING"] = request.headers["Content-Encoding"]
        if "Git-Protocol" in request.headers:
            env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
        proc = await asyncio.create_subprocess_exec(
            BACKEND,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers[name.strip()] = value.strip()
        return web.Response(status=status, body=payload, headers=headers)
