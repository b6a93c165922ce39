"""The engine's own model calls: JSON POSTs over a small HTTP/1.1 connection pool.

The ``post`` of :class:`~agent_fleet.spend.providers.http_transport.HttpTransport`. The gateway service
forwards streams through httpx (the transport's ``open``); the in-process harness
only ever needs a whole JSON answer, and at fleet concurrency the client stack is a large part of
the engine's CPU per call. So these calls skip it: a request is one precomputed head and the body in
one socket write, the answer is parsed by httptools (llhttp, the parser of Node.js and uvicorn) in
the connection's protocol callbacks, and the caller awaits one future. Measured against the
simulated provider at zero latency, 50 calls in flight: ~70 µs of client CPU per call, against
~150 µs for an ``aiohttp.ClientSession`` (``benchmarks/throughput.py`` shows where a call's time goes).

What the pool keeps of a full client: at most ``max_connections`` open at once (callers queue, first
come first served), keep-alive with idle connections closed after 30 s, TLS for ``https`` (the
system's trust store, as ``ssl.create_default_context`` builds it), ``Content-Length`` and chunked
answers, gzip/deflate bodies, ``Connection: close``, a total timeout per call and a connect timeout
(``min(timeout, 10 s)``). No proxies (the environment is not read) and no redirects (the provider
reads a 3xx as a client error naming its status). No answer is a
:class:`~agent_fleet.spend.providers.transport.TransportError`:

    cannot connect (refused, DNS, TLS handshake)      -> sent=False
    no answer in time (connect, queue or answer)      -> timed_out=True, sent=True
    connection lost or an answer that is not HTTP     -> sent=True
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import httptools

from agent_fleet.spend.providers.transport import Answer, TransportError

__all__ = ["JsonPoster"]

KEEPALIVE_S = 30.0  # an idle connection older than this is closed, not reused (aiohttp's default)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_USER_AGENT = "agent-fleet (Python)"


class _Lost(Exception):
    """The connection closed or sent something that is not HTTP before the answer was complete."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class _Answer:
    __slots__ = ("body", "headers", "keep_alive", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, keep_alive: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[_Answer] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._framed = False  # the answer states its length (Content-Length or chunked)
        self._started = False
        self.on_progress: Callable[[int], None] | None = None  # told of each piece of a streamed answer

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(_Lost(type(exc).__name__))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._started and not self._framed and exc is None:
            self._finish(keep_alive=False)  # an answer without a length ends where the connection does
        else:
            self._fail(_Lost(type(exc).__name__ if exc is not None else "ServerDisconnectedError"))

    # -- httptools callbacks
    def on_message_begin(self) -> None:
        self._started = True

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        if key not in self._headers:  # the first of a repeated header, as a multidict's get() gives it
            self._headers[key] = value.decode("latin-1")
        if key in ("content-length", "transfer-encoding"):
            self._framed = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        # Progress is a stream's pieces coming (an event stream answered 2xx): an error or a page that
        # is not the API's, however quickly it comes, says nothing of a model at work.
        if self.on_progress is not None and self._streaming():
            self.on_progress(len(body))

    def _streaming(self) -> bool:
        return self._parser.get_status_code() < 300 and "event-stream" in self._headers.get("content-type", "")

    def on_message_complete(self) -> None:
        self._finish(keep_alive=self._parser.should_keep_alive())

    # -- the pool's side
    def request(self, data: bytes) -> asyncio.Future[_Answer]:
        assert self.transport is not None
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return waiter

    def expire(self) -> None:
        self._fail(TimeoutError())
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _finish(self, *, keep_alive: bool) -> None:
        status = self._parser.get_status_code()
        headers, body = self._headers, b"".join(self._body)
        self._headers, self._body, self._framed, self._started = {}, [], False, False
        if 100 <= status < 200:
            return  # an informational answer: the real one follows
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(_Answer(status, headers, body, keep_alive))

    def _fail(self, exc: BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


def _decoded(answer: _Answer) -> bytes:
    coding = answer.headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return answer.body
    try:
        if coding in ("gzip", "x-gzip"):
            return zlib.decompress(answer.body, 16 + zlib.MAX_WBITS)
        if coding == "deflate":
            try:
                return zlib.decompress(answer.body)
            except zlib.error:
                return zlib.decompress(answer.body, -zlib.MAX_WBITS)  # raw deflate, as some servers send it
    except zlib.error:
        raise _Lost("ContentEncodingError") from None
    return answer.body


class JsonPoster:
    """POSTs JSON to ``base_url/<path>``; connections are opened on the running loop as calls need
    them and closed by ``aclose`` (a later call opens new ones)."""

    def __init__(self, *, base_url: str, headers: Mapping[str, str], timeout: float, max_connections: int) -> None:
        self._base = base_url.rstrip("/") + "/"
        parts = urlsplit(self._base)
        self._scheme = parts.scheme.lower()
        self._host = parts.hostname or ""
        try:
            self._port = parts.port or _DEFAULT_PORTS.get(self._scheme, 0)
        except ValueError:
            self._port = 0
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if parts.port in (None, _DEFAULT_PORTS.get(self._scheme)) else f"{host}:{parts.port}"
        self._target_root = self._base[len(f"{parts.scheme}://{parts.netloc}") :] or "/"
        lines = [f"Host: {self._host_header}", "Accept: */*", "Accept-Encoding: gzip, deflate"]
        lines.append(f"User-Agent: {_USER_AGENT}")
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
        # A line break inside a header (a key file's trailing newline) would split the request: refused
        # on every call, as aiohttp refuses it, naming the header and never its value.
        broken = [k for k, v in headers.items() if any(c in f"{k}{v}" for c in "\r\n\0")]
        self._refused = f"the {broken[0]} header holds a line break" if broken else None
        self._head_lines = "".join(line + "\r\n" for line in lines)
        self._heads: dict[str, bytes] = {}  # path -> the request head up to its Content-Length
        self._timeout = timeout
        self._connect_timeout = min(timeout, 10.0)
        self._max = max(1, max_connections)
        self._ssl: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._opening = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def _head(self, path: str) -> bytes:
        head = self._heads.get(path)
        if head is None:
            target = self._target_root + path
            head = self._heads[path] = f"POST {target} HTTP/1.1\r\n{self._head_lines}".encode("latin-1")
        return head

    async def post(self, path: str, payload: bytes, *, on_progress: Callable[[int], None] | None = None) -> Answer:
        """The whole answer, its body decoded. With ``on_progress`` (told the size of each piece of the
        answer as it arrives) the caller watches the call's time (``spend.patience``): only connecting is
        bounded here."""
        if self._refused is not None:
            raise ValueError(self._refused)
        loop = asyncio.get_running_loop()
        deadline = None if on_progress is not None else loop.time() + self._timeout
        try:
            answer = await self._exchange(loop, path, payload, deadline, on_progress)
            return Answer(answer.status, answer.headers, _decoded(answer))
        except _Lost as exc:
            raise TransportError(exc.cause, sent=True) from None
        except TimeoutError as exc:
            raise TransportError(type(exc).__name__, sent=True, timed_out=True) from None
        except (OSError, ValueError) as exc:  # could not connect: nothing was sent
            raise TransportError(type(exc).__name__, sent=False) from None

    async def _exchange(
        self,
        loop: asyncio.AbstractEventLoop,
        path: str,
        payload: bytes,
        deadline: float | None,
        on_progress: Callable[[int], None] | None,
    ) -> _Answer:
        conn = await self._acquire(loop, deadline)
        reuse = False
        try:
            conn.on_progress = on_progress
            waiter = conn.request(b"%sContent-Length: %d\r\n\r\n%s" % (self._head(path), len(payload), payload))
            timer = loop.call_at(deadline, conn.expire) if deadline is not None else None
            try:
                answer = await waiter
            finally:
                if timer is not None:
                    timer.cancel()
            reuse = answer.keep_alive
            return answer
        finally:
            conn.on_progress = None
            self._release(conn, reuse=reuse and not conn.closed)

    # -- the pool
    async def _acquire(self, loop: asyncio.AbstractEventLoop, deadline: float | None) -> _Connection:
        if loop is not self._loop:
            self._forget()  # connections belong to the loop they were opened on
            self._loop = loop
        while True:
            now = loop.time()
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed and now - conn.idle_since < KEEPALIVE_S:
                    self._busy.add(conn)
                    return conn
                conn.close()
            if len(self._busy) + self._opening < self._max and not self._waiters:
                return await self._connect(loop, deadline)
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken as it gave up: pass the turn on
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, loop: asyncio.AbstractEventLoop, deadline: float | None) -> _Connection:
        if self._scheme not in _DEFAULT_PORTS or not self._host or not self._port:
            raise ValueError(f"not an http(s) URL: {self._base}")
        tls: ssl.SSLContext | None = None
        if self._scheme == "https":
            tls = self._ssl = self._ssl or ssl.create_default_context()
        self._opening += 1
        try:
            limit = self._connect_timeout
            if deadline is not None:
                limit = min(limit, max(0.0, deadline - loop.time()))
            async with asyncio.timeout(limit):
                _, conn = await loop.create_connection(
                    _Connection, self._host, self._port, ssl=tls, server_hostname=self._host if tls else None
                )
        finally:
            self._opening -= 1
        if conn.closed:
            raise _Lost("ServerDisconnectedError")
        self._busy.add(conn)
        return conn

    def _release(self, conn: _Connection, *, reuse: bool) -> None:
        self._busy.discard(conn)
        if reuse and self._loop is not None:
            conn.idle_since = self._loop.time()
            self._idle.append(conn)
        else:
            conn.close()
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _forget(self) -> None:
        for conn in (*self._idle, *self._busy):
            if self._loop is not None and not self._loop.is_closed():
                conn.close()
        self._idle.clear()
        self._busy.clear()
        self._waiters.clear()
        self._opening = 0

    async def aclose(self) -> None:
        self._forget()
        self._loop = None
