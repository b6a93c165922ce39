from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from agent_fleet.hands.web import EgressPolicy, WebHands, extract_text, normalize_url

ARTICLE = """<html><head><title>Fleet notes</title><style>.x{color:red}</style>
<script>var stolen = "SCRIPT-CONTENT";</script></head>
<body><nav>Home | About</nav><article><h1>Running many agents</h1>
<p>The fleet runs hundreds of agents as one. Admission bounds how many run at once, and the gateway
bounds what each one costs. Sessions are cheap to lose because the log is the source of truth.</p>
<p>Hands are tools, not homes: a sandbox is created only when a session first needs one, which keeps
the time to the first model call short for every agent in the fleet.</p></article></body></html>"""


class Site:
    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.base = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[path] += 1
        if path == "/article":
            return web.Response(text=ARTICLE, content_type="text/html")
        if path == "/plain":
            return web.Response(text="just text", content_type="text/plain")
        if path == "/redirect":
            raise web.HTTPFound("/article")
        if path == "/away":
            raise web.HTTPFound(self.base.replace("127.0.0.1", "localhost") + "/article")
        if path == "/loop":
            raise web.HTTPFound("/loop")
        if path == "/big":
            return web.Response(text="a" * 500_000, content_type="text/plain")
        if path == "/slow":
            await asyncio.sleep(5)
            return web.Response(text="late")
        if path == "/binary":
            return web.Response(body=b"\x00\x01", content_type="application/octet-stream")
        if path == "/missing":
            return web.Response(status=404, text="not here", content_type="text/plain")
        return web.Response(status=500)


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    s = Site()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", s.handle)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    s.base = f"http://127.0.0.1:{port}"
    try:
        yield s
    finally:
        await runner.cleanup()


def hands_for(site: Site, *paths: str, **policy: object) -> WebHands:
    pol = EgressPolicy(allow_private_networks=True, **policy)  # type: ignore[arg-type]
    return WebHands([site.base + p for p in paths], pol)


async def test_fetch_returns_readable_text(site: Site) -> None:
    hands = hands_for(site, "/article", "/plain")
    try:
        out = await hands.execute("fetch_url", {"url": site.base + "/article"})
        assert not out.is_error
        assert "Admission bounds how many run at once" in out.output
        assert "SCRIPT-CONTENT" not in out.output and ".x{color" not in out.output
        assert out.output.startswith(f"URL: {site.base}/article\nStatus: 200")
        plain = await hands.execute("fetch_url", {"url": site.base + "/plain#frag"})
        assert plain.output.endswith("just text")
    finally:
        await hands.aclose()


async def test_other_urls_are_out_of_scope_and_never_requested(site: Site) -> None:
    hands = hands_for(site, "/article")
    try:
        out = await hands.execute("fetch_url", {"url": site.base + "/plain"})
        assert out.is_error and "not one of your partition's URLs" in out.output
        assert site.hits["/plain"] == 0
        bad = await hands.execute("fetch_url", {"url": "file:///etc/passwd"})
        assert bad.is_error
        assert (await hands.execute("read_file", {"path": "x"})).is_error
    finally:
        await hands.aclose()


async def test_redirects_are_rechecked_against_the_policy(site: Site) -> None:
    hands = hands_for(site, "/redirect", "/away", "/loop", max_redirects=3)
    try:
        ok = await hands.execute("fetch_url", {"url": site.base + "/redirect"})
        assert not ok.is_error and "Running many agents" in ok.output
        away = await hands.execute("fetch_url", {"url": site.base + "/away"})
        assert away.is_error and "host localhost is not allowed" in away.output
        assert site.hits["/article"] == 1  # the disallowed hop was never requested
        loop = await hands.execute("fetch_url", {"url": site.base + "/loop"})
        assert loop.is_error and "more than 3 redirects" in loop.output
        assert site.hits["/loop"] == 4
    finally:
        await hands.aclose()


async def test_size_time_and_type_caps(site: Site) -> None:
    # the time cap has its own hands: on a busy machine the big page alone may take longer than 0.5 s
    hands = hands_for(site, "/big", "/binary", "/missing", max_bytes=10_000, timeout=30, max_chars=5_000)
    timed = hands_for(site, "/slow", timeout=0.5)
    try:
        big = await hands.execute("fetch_url", {"url": site.base + "/big"})
        assert "[page cut at 10000 bytes]" in big.output and "[text cut at 5000 characters]" in big.output
        assert big.output.count("a") <= 5_000 + 10
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        slow = await timed.execute("fetch_url", {"url": site.base + "/slow"})
        assert slow.is_error and "longer than 0.5 s" in slow.output and loop.time() - t0 < 3
        binary = await hands.execute("fetch_url", {"url": site.base + "/binary"})
        assert binary.is_error and "application/octet-stream" in binary.output
        missing = await hands.execute("fetch_url", {"url": site.base + "/missing"})
        assert missing.is_error and "Status: 404" in missing.output
    finally:
        await hands.aclose()
        await timed.aclose()


async def test_private_networks_are_refused_by_default(site: Site) -> None:
    hands = WebHands([site.base + "/article"])
    try:
        out = await hands.execute("fetch_url", {"url": site.base + "/article"})
        assert out.is_error and "private or local address" in out.output
        assert site.hits["/article"] == 0
    finally:
        await hands.aclose()


def test_stdlib_extractor_for_the_light_install() -> None:
    text = extract_text(ARTICLE, use_trafilatura=False)
    assert text.startswith("Fleet notes")
    assert "Admission bounds how many run at once" in text and "SCRIPT-CONTENT" not in text
    assert "color:red" not in text


def test_normalize_url() -> None:
    assert normalize_url("HTTP://Example.COM#x") == "http://example.com/"
    assert normalize_url("https://a.b:8443/p?q=1") == "https://a.b:8443/p?q=1"


def test_host_patterns() -> None:
    pol = EgressPolicy(allowed_hosts=frozenset({"*.example.org", "api.test"}))
    assert pol.host_allowed("docs.example.org", frozenset())
    assert not pol.host_allowed("example.org.evil.com", frozenset())
    assert pol.host_allowed("API.test", frozenset())
    assert EgressPolicy().host_allowed("own.host", frozenset({"own.host"}))
