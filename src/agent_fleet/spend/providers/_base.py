"""What the two wire formats share: one provider endpoint, its key, its options and its transport.

Every request goes through the provider's :class:`~agent_fleet.spend.providers.transport.Transport`
(``transport=``, a factory of one; real HTTP by default): the engine's own calls as whole answers
(``post``), the gateway service's pass-through (``send_raw``, streams included) through ``open``.
What an answer means — errors, rate-limit headers — is read here and in ``_wire``, never in a transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Required, TypedDict

from agent_fleet.spend.patience import current_watch
from agent_fleet.spend.providers._wire import (
    SignalSink,
    error_from_status,
    exchange,
    failed_exchange,
    host_of,
    read_signals,
)
from agent_fleet.spend.providers.http_transport import HttpTransport
from agent_fleet.spend.providers.transport import Endpoint, Reply, TransportError, TransportFactory

__all__ = ["HttpProvider", "ProviderOptions", "ProviderSettings"]

_CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key"})


class ProviderSettings(TypedDict, total=False):
    """What a provider is built with beyond its endpoint, model and key."""

    timeout: float
    max_connections: int
    name: str | None
    on_signals: SignalSink | None
    transport: TransportFactory | None


class ProviderOptions(ProviderSettings, total=False):
    """What every provider is built with (the keywords of :class:`HttpProvider`)."""

    api_key: Required[str]
    base_url: str | None
    model: str | None


class HttpProvider:
    raw_path: ClassVar[str]  # where ``send_raw`` posts: the format's chat endpoint
    kind: ClassVar[str]  # the wire format, also the provider's name unless it is given one
    default_base_url: ClassVar[str]
    default_model: ClassVar[str]
    # The gateway watches its calls (spend.patience): it reports progress, and the watch bounds its time.
    watched: ClassVar[bool] = True

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str | None = None,
        timeout: float = 120.0,
        max_connections: int = 64,
        name: str | None = None,
        on_signals: SignalSink | None = None,
        transport: TransportFactory | None = None,
    ) -> None:
        """``base_url``, ``model`` and ``name`` left out (or empty) are the format's own; ``transport``
        builds the provider's transport from its endpoint (default: real HTTP)."""
        self.name = name or self.kind
        self.model = model or self.default_model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.host = host_of(self.base_url)
        self.on_signals = on_signals
        self._key = api_key
        self._headers = self.auth_headers(api_key)
        endpoint = Endpoint(self.base_url, self._headers, timeout, max_connections)
        self.transport = (transport or HttpTransport)(endpoint)

    @staticmethod
    def auth_headers(api_key: str) -> dict[str, str]:
        """The headers every request carries: the key as the format sends it, and the content type."""
        raise NotImplementedError

    async def _post_json(self, path: str, payload: bytes, model: str, *, streaming: bool = False) -> bytes:
        """POST one request of a call; under the gateway's watch (``spend.patience``) the watch is told
        what is sent and hears every piece of the answer, and it alone bounds the call's time."""
        watch = current_watch()
        if watch is not None:
            watch.sending(streaming=streaming)
        return await exchange(
            self.transport,
            path,
            payload,
            host=self.host,
            model=model,
            secret=self._key,
            on_signals=self.on_signals,
            on_progress=watch.progress if watch is not None else None,
        )

    async def send_raw(
        self,
        payload: bytes,
        *,
        model: str,
        stream: bool = False,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """POST an already-encoded body to ``path`` (default: the format's chat endpoint; a query string
        may follow it), with the client's own ``headers`` over the provider's (the gateway service's
        pass-through). The provider's credentials are set here and cannot be overridden."""
        sent = None
        if headers:
            sent = {**self._headers}
            sent.update((k, v) for k, v in headers.items() if k.lower() not in _CREDENTIALS)
        try:
            reply = await self.transport.open(path or self.raw_path, payload, headers=sent, stream=stream)
        except TransportError as exc:
            raise failed_exchange(self.host, exc) from None
        read_signals(reply.headers, model, self.on_signals)
        if reply.status_code >= 400:
            raise error_from_status(self.host, reply.status_code, reply.headers, reply.content, scrub=self._key)
        return reply

    async def aclose(self) -> None:
        await self.transport.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"
