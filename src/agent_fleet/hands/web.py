"""Web hands: ``fetch_url(url)`` for list partitions whose items are URLs.

Scope is exclusive: a session may fetch only its own partition's URLs; any other URL is a tool error
and no request is made. Every request, and every redirect hop, is checked against an
:class:`EgressPolicy` (scheme, allowed hosts, private networks); redirects are followed by hand so
each hop is re-checked. Responses are capped in bytes and time. HTML comes back as readable text
(trafilatura when the ``web`` extra is installed, else a standard-library tag stripper).

DNS is checked before connecting: a name that resolves to a private, loopback or link-local address
is refused unless ``allow_private_networks`` (a resolver that changes its answer between the check
and the connection is outside what this guards).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from agent_fleet.domain.model import ToolSpec
from agent_fleet.errors import FleetError
from agent_fleet.hands.port import ToolOutput

__all__ = ["FETCH_URL", "EgressDenied", "EgressPolicy", "WebHands", "extract_text", "is_url", "normalize_url"]

FETCH_URL = ToolSpec(
    "fetch_url",
    "Fetch one of your partition's URLs and return its readable text.",
    {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
)

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")


class EgressDenied(FleetError):
    """A request the egress policy refuses; reported to the model as a tool error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EgressPolicy:
    allowed_hosts: frozenset[str] | None = None  # None: the hosts of the partition's own URLs
    schemes: frozenset[str] = frozenset({"http", "https"})
    max_bytes: int = 2_000_000
    timeout: float = 20.0  # whole fetch, all hops
    max_redirects: int = 5
    max_chars: int = 40_000  # text handed to the model
    allow_private_networks: bool = False
    user_agent: str = "agent-fleet/0.1 (+fetch_url)"

    def host_allowed(self, host: str, partition_hosts: frozenset[str]) -> bool:
        allowed = self.allowed_hosts if self.allowed_hosts is not None else partition_hosts
        host = host.lower().rstrip(".")
        for pattern in allowed:
            p = pattern.lower().rstrip(".")
            if host == p or (p.startswith("*.") and host.endswith(p[1:])):
                return True
        return False


def is_url(text: str) -> bool:
    parts = urlsplit(text.strip())
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def normalize_url(url: str) -> str:
    """Scheme and host lower-cased, fragment dropped, empty path as '/'."""
    p = urlsplit(url.strip())
    netloc = (p.hostname or "").lower()
    if p.port is not None:
        netloc = f"{netloc}:{p.port}"
    if p.username:
        netloc = f"{p.username}@{netloc}"
    return urlunsplit((p.scheme.lower(), netloc, p.path or "/", p.query, ""))


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BLOCK = frozenset(
        {"p", "div", "br", "li", "ul", "ol", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skip:
            self.parts.append(data)


def _strip_tags(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.parts).splitlines()]
    body = "\n".join(line for line in lines if line)
    title = " ".join("".join(parser.title).split())
    return f"{title}\n\n{body}" if title and not body.startswith(title) else body


def extract_text(html: str, *, url: str | None = None, use_trafilatura: bool = True) -> str:
    """Readable text of an HTML page: main content via trafilatura when present, else all text."""
    if use_trafilatura:
        try:
            import trafilatura
        except ImportError:
            pass
        else:
            text = trafilatura.extract(html, url=url, include_comments=False, include_tables=True)
            if text and text.strip():
                return str(text).strip()
    return _strip_tags(html)


async def _check_address(host: str, port: int, policy: EgressPolicy) -> None:
    if policy.allow_private_networks:
        return
    try:
        addrs = [ipaddress.ip_address(host)]
    except ValueError:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror:
            raise EgressDenied(f"cannot resolve {host}") from None
        addrs = [ipaddress.ip_address(info[4][0]) for info in infos]
    for addr in addrs:
        if addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_multicast or addr.is_reserved:
            raise EgressDenied(f"{host} is a private or local address; the egress policy does not allow it")


class WebHands:
    """``fetch_url`` over one partition's URLs."""

    def __init__(
        self,
        urls: Iterable[str],
        policy: EgressPolicy | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        use_trafilatura: bool = True,
    ) -> None:
        # Parsed on first use: a fleet builds every session's hands up front, most before any fetch.
        self._raw_urls = tuple(urls)
        self._parsed: tuple[frozenset[str], frozenset[str]] | None = None
        self.policy = policy or EgressPolicy()
        self._client = client
        self._own_client = client is None
        self._use_trafilatura = use_trafilatura
        self.requests = 0

    @property
    def _urls(self) -> frozenset[str]:
        return self._scope()[0]

    @property
    def _hosts(self) -> frozenset[str]:
        return self._scope()[1]

    def _scope(self) -> tuple[frozenset[str], frozenset[str]]:
        if self._parsed is None:
            urls = frozenset(normalize_url(u) for u in self._raw_urls if is_url(u))
            self._parsed = (urls, frozenset((urlsplit(u).hostname or "") for u in urls))
        return self._parsed

    @property
    def urls(self) -> Sequence[str]:
        return sorted(self._urls)

    def specs(self) -> tuple[ToolSpec, ...]:
        return (FETCH_URL,)

    async def execute(self, name: str, input: dict[str, Any]) -> ToolOutput:
        if name != "fetch_url":
            return ToolOutput(f"error: unknown tool {name!r}", is_error=True)
        url = input.get("url")
        if not isinstance(url, str) or not is_url(url):
            return ToolOutput("error: fetch_url needs an http(s) 'url'", is_error=True)
        if normalize_url(url) not in self._urls:
            return ToolOutput(f"error: {url} is not one of your partition's URLs", is_error=True)
        try:
            async with asyncio.timeout(self.policy.timeout):
                return await self._fetch(normalize_url(url))
        except TimeoutError:
            return ToolOutput(f"error: fetching {url} took longer than {self.policy.timeout:g} s", is_error=True)
        except EgressDenied as exc:
            return ToolOutput(f"error: {exc}", is_error=True)
        except httpx.HTTPError as exc:
            return ToolOutput(f"error: fetching {url} failed ({type(exc).__name__})", is_error=True)

    def _check(self, url: str) -> tuple[str, int]:
        p = urlsplit(url)
        if p.scheme not in self.policy.schemes:
            raise EgressDenied(f"scheme {p.scheme!r} is not allowed")
        host = p.hostname or ""
        if not self.policy.host_allowed(host, self._hosts):
            raise EgressDenied(f"host {host} is not allowed by the egress policy")
        return host, p.port or (443 if p.scheme == "https" else 80)

    async def _fetch(self, url: str) -> ToolOutput:
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False, timeout=self.policy.timeout)
        current = url
        for _hop in range(self.policy.max_redirects + 1):
            host, port = self._check(current)
            await _check_address(host, port, self.policy)
            self.requests += 1
            headers = {"User-Agent": self.policy.user_agent, "Accept": "text/html, text/*;q=0.9, */*;q=0.1"}
            async with self._client.stream("GET", current, headers=headers, follow_redirects=False) as resp:
                if resp.is_redirect:
                    location = resp.headers.get("location")
                    if not location:
                        return ToolOutput(f"error: {current} redirected without a location", is_error=True)
                    current = normalize_url(urljoin(current, location))
                    continue
                body, truncated = await self._read(resp)
                return await self._render(current, resp, body, truncated)
        return ToolOutput(f"error: more than {self.policy.max_redirects} redirects from {url}", is_error=True)

    async def _read(self, resp: httpx.Response) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            room = self.policy.max_bytes - size
            if len(chunk) >= room:
                chunks.append(chunk[:room])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), False

    async def _render(self, url: str, resp: httpx.Response, body: bytes, truncated: bool) -> ToolOutput:
        ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype and not ctype.startswith(_TEXT_TYPES):
            return ToolOutput(f"error: {url} is {ctype}, not a readable page", is_error=True)
        text = body.decode(resp.encoding or "utf-8", errors="replace")
        if ctype in ("text/html", "application/xhtml+xml") or (not ctype and "<html" in text[:2000].lower()):
            text = await asyncio.to_thread(extract_text, text, url=url, use_trafilatura=self._use_trafilatura)
        notes = []
        if truncated:
            notes.append(f"[page cut at {self.policy.max_bytes} bytes]")
        if len(text) > self.policy.max_chars:
            text = text[: self.policy.max_chars]
            notes.append(f"[text cut at {self.policy.max_chars} characters]")
        head = f"URL: {url}\nStatus: {resp.status_code}\n\n"
        return ToolOutput(head + text + ("\n" + " ".join(notes) if notes else ""), is_error=resp.status_code >= 400)

    async def aclose(self) -> None:
        if self._own_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
