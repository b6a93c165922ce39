"""The port under the providers: one HTTP exchange with a provider's endpoint.

A provider builds its transport from its :class:`Endpoint` (base URL, the headers every request
carries, timeout, connection limit) through a :data:`TransportFactory`; it then reads statuses,
headers and bodies only — the mapping to the engine's errors and the rate-limit headers are the
provider's (``_wire``), the same for every transport::

    post(path, payload, on_progress)         the whole answer (the engine's own calls; a stream is read
                                             whole, each piece told to ``on_progress``)
    open(path, payload, headers, stream)     a :class:`Reply` whose body may still be coming (the gateway
                                             service's pass-through; an error status comes read whole)

A transport raises :class:`TransportError` when no answer came, saying whether the request may have
gone out (``sent``) and whether time ran out (``timed_out``). The default transport is
:class:`~agent_fleet.spend.providers.http.HttpTransport`; :class:`MockTransport` answers from a
function (as httpx's ``MockTransport`` does), so a provider's tests need no server.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "Answer",
    "Endpoint",
    "MockReply",
    "MockRequest",
    "MockTransport",
    "Reply",
    "Transport",
    "TransportError",
    "TransportFactory",
]


class TransportError(Exception):
    """No answer came. ``sent``: the request may have reached the server (and may be billed)."""

    def __init__(self, cause: str, *, sent: bool, timed_out: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.sent = sent
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str
    headers: Mapping[str, str]  # what every request carries (the key among them)
    timeout: float
    max_connections: int


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes


class Reply(Protocol):
    """An answer whose body may still be coming (the subset of ``httpx.Response`` the gateway uses)."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...  # the whole body (read, or not streamed)

    def aiter_raw(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


class Transport(Protocol):
    async def post(self, path: str, payload: bytes, *, on_progress: Callable[[int], None] | None = None) -> Answer:
        """POST ``payload`` to ``path`` (under the base URL, with the endpoint's headers): the whole answer.
        With ``on_progress`` the caller bounds the call's time (only connecting is bounded here)."""
        ...

    async def open(
        self, path: str, payload: bytes, *, headers: Mapping[str, str] | None = None, stream: bool = False
    ) -> Reply:
        """POST with ``headers`` in place of the endpoint's (when given). With ``stream`` a 2xx body is
        left unread and the caller closes the reply; an error status (≥ 400) comes back read and closed."""
        ...

    async def aclose(self) -> None: ...


TransportFactory = Callable[[Endpoint], Transport]


# --- the mock ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MockRequest:
    path: str  # under the base URL, a query string included
    payload: bytes
    headers: Mapping[str, str]  # names in lower case: the endpoint's, or the ones ``open`` was given
    stream: bool = False

    def json(self) -> Any:
        return json.loads(self.payload)


@dataclass(slots=True)
class MockReply:
    status_code: int
    headers: Mapping[str, str]
    chunks: Sequence[bytes]
    closed: bool = False

    @property
    def content(self) -> bytes:
        return b"".join(self.chunks)

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


Handler = Callable[[MockRequest], "Answer | Awaitable[Answer]"]


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


@dataclass(eq=False)
class MockTransport:
    """A transport whose answers come from ``handler`` (a function of the :class:`MockRequest`, sync or
    async, returning an :class:`Answer` or raising :class:`TransportError`). Pass the instance as a
    provider's ``transport``: it is its own factory, and records the endpoint and every request."""

    handler: Handler
    endpoint: Endpoint | None = None
    requests: list[MockRequest] = field(default_factory=list)
    closed: bool = False

    def __call__(self, endpoint: Endpoint) -> MockTransport:
        self.endpoint = endpoint
        return self

    async def _answer(self, request: MockRequest) -> Answer:
        self.requests.append(request)
        got = self.handler(request)
        answer = await got if inspect.isawaitable(got) else got
        return Answer(answer.status, _lower(answer.headers), answer.body)

    async def post(self, path: str, payload: bytes, *, on_progress: Callable[[int], None] | None = None) -> Answer:
        own = _lower(self.endpoint.headers) if self.endpoint is not None else {}
        answer = await self._answer(MockRequest(path, payload, own))
        if on_progress is not None and answer.status < 300 and "event-stream" in answer.headers.get("content-type", ""):
            on_progress(len(answer.body))
        return answer

    async def open(
        self, path: str, payload: bytes, *, headers: Mapping[str, str] | None = None, stream: bool = False
    ) -> MockReply:
        own = _lower(headers if headers is not None else self.endpoint.headers if self.endpoint is not None else {})
        answer = await self._answer(MockRequest(path, payload, own, stream))
        return MockReply(answer.status, answer.headers, [answer.body], closed=answer.status >= 400)

    async def aclose(self) -> None:
        self.closed = True
