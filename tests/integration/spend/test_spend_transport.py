"""The engine's own HTTP/1.1 client (spend/providers/_fast.py, the default transport's ``post``) against
real sockets on loopback; its answers read as every provider reads them (``_wire.exchange``).

A raw asyncio server writes exactly the bytes each case needs (chunked bodies, gzip, answers cut
short, answers that end with the connection), so every framing and failure path runs over TCP.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import ssl
import subprocess
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent_fleet.errors import ClientRequestError, ProviderTimeout, ProviderUnreachable, RateLimited
from agent_fleet.spend.providers._fast import KEEPALIVE_S, JsonPoster
from agent_fleet.spend.providers._wire import exchange

KEY = "sk-transport-0123456789"
OK = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()

Reply = Callable[[bytes], bytes | None]  # request bytes -> raw answer (None: close without answering)


@dataclass
class RawServer:
    reply: Reply
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    hold: asyncio.Event | None = None  # when set, answers wait for it
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = dict(line.lower().split(b": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
                length = int(fields[b"content-length"])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if self.hold is not None:
                    await self.hold.wait()
                answer = self.reply(request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            writer.close()


def answer(body: bytes, *, status: str = "200 OK", headers: tuple[str, ...] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def started(raw: RawServer) -> tuple[RawServer, asyncio.Server]:
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    raw.port = server.sockets[0].getsockname()[1]
    return raw, server


def poster(port: int, *, timeout: float = 5.0, max_connections: int = 8) -> JsonPoster:
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    return JsonPoster(
        base_url=f"http://127.0.0.1:{port}/v1", headers=headers, timeout=timeout, max_connections=max_connections
    )


async def post(p: JsonPoster, port: int, payload: bytes = b'{"model": "m"}', **kw: object) -> bytes:
    return await exchange(
        p,
        "chat/completions",
        payload,
        host=f"127.0.0.1:{port}",
        model="m",
        secret=KEY,
        on_signals=kw.get("sink"),  # type: ignore[arg-type]
    )


async def test_a_request_carries_its_headers_and_body_and_the_connection_is_kept() -> None:
    raw, server = await started(RawServer(lambda req: answer(OK)))
    p = poster(raw.port)
    try:
        assert await post(p, raw.port) == OK
        assert await post(p, raw.port, b'{"model": "n"}') == OK
    finally:
        await p.aclose()
        server.close()
    first = raw.requests[0].decode()
    head, body = first.split("\r\n\r\n", 1)
    lines = head.split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    fields = {line.split(": ", 1)[0].lower(): line.split(": ", 1)[1] for line in lines[1:]}
    assert fields["host"] == f"127.0.0.1:{raw.port}"
    assert fields["authorization"] == f"Bearer {KEY}"
    assert fields["content-type"] == "application/json"
    assert fields["content-length"] == str(len(body)) and body == '{"model": "m"}'
    assert fields["accept-encoding"] == "gzip, deflate"
    assert raw.connections == 1  # the second call reused the first connection


async def test_chunked_and_compressed_answers_are_read_whole() -> None:
    chunks = [OK[:10], OK[10:]]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    replies = iter(
        [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
            answer(gzip.compress(OK), headers=("Content-Encoding: gzip",)),
            answer(zlib.compress(OK), headers=("Content-Encoding: deflate",)),
        ]
    )
    raw, server = await started(RawServer(lambda req: next(replies)))
    p = poster(raw.port)
    try:
        assert [await post(p, raw.port) for _ in range(3)] == [OK, OK, OK]
    finally:
        await p.aclose()
        server.close()
    assert raw.connections == 1


async def test_an_answer_that_ends_with_its_connection_is_read_and_the_next_call_reconnects() -> None:
    replies = iter([b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + OK, answer(OK, headers=("Connection: close",))])
    raw, server = await started(RawServer(lambda req: next(replies)))
    p = poster(raw.port)
    try:
        assert await post(p, raw.port) == OK
        assert await post(p, raw.port) == OK
    finally:
        await p.aclose()
        server.close()
    assert raw.connections == 2


async def failure(reply: Reply, expected: type[Exception]) -> Exception:
    """What one call raises against a server answering with ``reply``."""
    raw, server = await started(RawServer(reply))
    p = poster(raw.port)
    try:
        with pytest.raises(expected) as info:
            await post(p, raw.port)
    finally:
        await p.aclose()
        server.close()
    return info.value


async def test_error_statuses_map_with_their_headers_and_the_key_is_scrubbed() -> None:
    body = json.dumps({"error": {"type": "requests", "message": f"slow down {KEY}"}}).encode()
    reply = answer(body, status="429 Too Many Requests", headers=("Retry-After: 7",))
    error = await failure(lambda req: reply, RateLimited)
    assert isinstance(error, RateLimited) and error.retry_after == 7.0
    assert KEY not in str(error)


async def test_a_redirect_is_not_followed_but_named() -> None:
    reply = answer(b"", status="307 Temporary Redirect", headers=("Location: http://elsewhere/v1",))
    error = await failure(lambda req: reply, ClientRequestError)
    assert "answered 307" in str(error)


@pytest.mark.parametrize(
    "reply",
    [lambda req: None, lambda req: answer(OK, headers=("Connection: close",))[:-5]],
    ids=["closed before answering", "closed mid-body"],
)
async def test_a_connection_lost_before_the_whole_answer_was_sent(reply: Reply) -> None:
    error = await failure(reply, ProviderUnreachable)
    assert error.sent is True  # type: ignore[attr-defined]
    assert not isinstance(error, ProviderTimeout)


async def test_no_answer_in_time_is_a_timeout_that_was_sent_and_the_connection_is_dropped() -> None:
    raw, server = await started(RawServer(lambda req: answer(OK)))
    raw.hold = asyncio.Event()
    p = poster(raw.port, timeout=0.2)
    try:
        with pytest.raises(ProviderTimeout) as info:
            await post(p, raw.port)
        raw.hold.set()
        assert await post(p, raw.port) == OK  # a fresh connection: the stale answer is never read
    finally:
        await p.aclose()
        server.close()
    assert info.value.sent is True  # type: ignore[attr-defined]
    assert raw.connections == 2


async def test_calls_beyond_the_connection_limit_queue_and_all_complete() -> None:
    raw, server = await started(RawServer(lambda req: answer(OK)))
    raw.hold = asyncio.Event()
    p = poster(raw.port, max_connections=3)
    try:
        calls = [asyncio.ensure_future(post(p, raw.port)) for _ in range(10)]
        while len(raw.requests) < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert len(raw.requests) == 3  # the other seven wait for a connection
        raw.hold.set()
        assert await asyncio.gather(*calls) == [OK] * 10
    finally:
        await p.aclose()
        server.close()
    assert raw.most_open == 3 and raw.connections == 3


async def test_a_cancelled_call_drops_its_connection() -> None:
    raw, server = await started(RawServer(lambda req: answer(OK)))
    raw.hold = asyncio.Event()
    p = poster(raw.port, max_connections=1)
    try:
        call = asyncio.ensure_future(post(p, raw.port))
        while not raw.requests:
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        raw.hold.set()
        assert await post(p, raw.port) == OK  # the limit of one was given back
    finally:
        await p.aclose()
        server.close()
    assert raw.connections == 2


async def test_idle_connections_are_not_reused_after_the_keepalive_time(monkeypatch: pytest.MonkeyPatch) -> None:
    raw, server = await started(RawServer(lambda req: answer(OK)))
    p = poster(raw.port)
    loop = asyncio.get_running_loop()
    try:
        assert await post(p, raw.port) == OK
        now = loop.time()
        monkeypatch.setattr(loop, "time", lambda: now + KEEPALIVE_S + 1)
        assert await post(p, raw.port) == OK
    finally:
        monkeypatch.undo()
        await p.aclose()
        server.close()
    assert raw.connections == 2


async def test_nothing_listening_was_not_sent() -> None:
    raw, server = await started(RawServer(lambda req: answer(OK)))
    port = raw.port
    server.close()
    await server.wait_closed()
    p = poster(port)
    try:
        with pytest.raises(ProviderUnreachable) as info:
            await post(p, port)
    finally:
        await p.aclose()
    assert info.value.sent is False  # type: ignore[attr-defined]
    assert KEY not in str(info.value)


def test_a_header_with_a_line_break_is_refused_without_its_value() -> None:
    p = JsonPoster(
        base_url="http://127.0.0.1:9/v1",
        headers={"authorization": f"Bearer {KEY}\n"},
        timeout=1.0,
        max_connections=1,
    )
    with pytest.raises(ValueError) as info:
        asyncio.run(post(p, 9))
    assert "authorization" in str(info.value) and KEY not in str(info.value)


def test_a_poster_serves_one_event_loop_after_another() -> None:
    """Connections belong to the loop that opened them: a later loop opens its own."""
    connections: list[object] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def setup(self) -> None:
            super().setup()
            connections.append(self.connection)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-length", str(len(OK)))
            self.end_headers()
            self.wfile.write(OK)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    p = poster(port)
    try:
        assert asyncio.run(post(p, port)) == OK
        assert asyncio.run(post(p, port)) == OK
        asyncio.run(p.aclose())
    finally:
        server.shutdown()
        server.server_close()
    assert len(connections) == 2


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (the openssl command line)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subject = ["-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), *subject],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_https_verifies_the_server_certificate(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    raw = RawServer(lambda req: answer(OK))
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    headers = {"authorization": f"Bearer {KEY}"}
    untrusted = JsonPoster(base_url=f"https://127.0.0.1:{port}/v1", headers=headers, timeout=5.0, max_connections=1)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the system trust store, as OpenSSL reads it, trusts it
    trusted = JsonPoster(base_url=f"https://127.0.0.1:{port}/v1", headers=headers, timeout=5.0, max_connections=1)
    try:
        assert await post(trusted, port) == OK
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(ProviderUnreachable) as info:
            await post(untrusted, port)
    finally:
        await trusted.aclose()
        await untrusted.aclose()
        server.close()
    assert info.value.sent is False  # type: ignore[attr-defined]
    assert raw.requests and raw.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
