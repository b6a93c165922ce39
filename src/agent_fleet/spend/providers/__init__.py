"""Model providers: one wire format each, over one shared HTTP client per provider.

:func:`build_provider` turns ``--provider URL|openai|anthropic`` (or ``FLEET_BASE_URL``) and a key into a
provider; :func:`resolve_api_key` reads ``FLEET_API_KEY``, else ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Unpack
from urllib.parse import urlsplit

from agent_fleet.domain.calls import Quirks
from agent_fleet.errors import ConfigError
from agent_fleet.spend.providers._base import ProviderSettings
from agent_fleet.spend.providers._wire import ProviderTimeout, RateSignals
from agent_fleet.spend.providers.anthropic import AnthropicProvider
from agent_fleet.spend.providers.openai import OpenAIProvider

__all__ = [
    "AnthropicProvider",
    "HttpProvider",
    "OpenAIProvider",
    "ProviderTimeout",
    "RateSignals",
    "build_provider",
    "provider_kind",
    "resolve_api_key",
    "resolve_base_url",
]

HttpProvider = OpenAIProvider | AnthropicProvider

_KINDS = ("openai", "anthropic")
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def provider_kind(kind_or_url: str | None, *, model: str | None = None) -> str:
    """``openai`` or ``anthropic``: named outright, else guessed from the URL's host, else from the model name."""
    if kind_or_url in _KINDS:
        return kind_or_url
    host = urlsplit(kind_or_url or "").netloc.lower()
    if "anthropic" in host:
        return "anthropic"
    if model and model.lower().startswith("claude"):
        return "anthropic"
    return "openai"


def resolve_base_url(kind_or_url: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The base URL from ``--provider URL``, else ``FLEET_BASE_URL``; None means the provider's default."""
    env = os.environ if env is None else env
    if kind_or_url and kind_or_url not in _KINDS:
        if not kind_or_url.startswith(("http://", "https://")):
            raise ConfigError(f"--provider must be openai, anthropic or an http(s) URL, not {kind_or_url!r}")
        return kind_or_url
    return env.get("FLEET_BASE_URL") or None


def resolve_api_key(kind: str, env: Mapping[str, str] | None = None, *, base_url: str | None = None) -> str:
    """``FLEET_API_KEY``, else the provider's own variable. A local endpoint may go without a key."""
    env = os.environ if env is None else env
    own = "ANTHROPIC_API_KEY" if kind == "anthropic" else "OPENAI_API_KEY"
    key = env.get("FLEET_API_KEY") or env.get(own)
    if key:
        return key
    if base_url and urlsplit(base_url).hostname in _LOCAL_HOSTS:
        return "local"
    raise ConfigError(f"no API key: set FLEET_API_KEY or {own}")


def build_provider(
    kind_or_url: str | None,
    *,
    api_key: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    responses_api: bool | None = None,
    quirks: Quirks | None = None,
    **settings: Unpack[ProviderSettings],
) -> HttpProvider:
    """A provider from ``--provider`` (``openai``, ``anthropic`` or a URL) plus optional overrides;
    ``settings`` (``timeout``, ``max_connections``, ``name``, ``on_signals``) go to it as given.

    ``base_url`` wins over a URL in ``kind_or_url``, which wins over ``FLEET_BASE_URL``.
    """
    kind = provider_kind(kind_or_url if base_url is None else (kind_or_url or base_url), model=model)
    url = base_url or resolve_base_url(kind_or_url, env)
    key = api_key or resolve_api_key(kind, env, base_url=url)
    if kind == "anthropic":
        return AnthropicProvider(api_key=key, base_url=url, model=model, **settings)
    return OpenAIProvider(
        api_key=key, base_url=url, model=model, responses_api=responses_api, quirks=quirks, **settings
    )
