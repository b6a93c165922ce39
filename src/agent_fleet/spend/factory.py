"""Build a :class:`Gateway` from fleet.yaml and the command-line flags.

Providers: one per endpoint (kind + base URL + key variable), shared by every model on it, so the
concurrency limit and rate buckets of one endpoint are one. Each model is routed by its fleet.yaml
``name`` and by its model id. Without ``models`` in the config, one provider comes from
``--provider``/``--model`` and the environment (SPEC.md, "Credentials").

Flags win over the config: ``session_tokens``/``session_usd``/``fleet_usd``/``concurrency`` given here
replace the config's values when they are not None.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from agent_fleet.clock import Clock
from agent_fleet.config import FleetConfig
from agent_fleet.domain.accounts import queue_account
from agent_fleet.domain.calls import CallShape, Quirks
from agent_fleet.errors import ConfigError
from agent_fleet.spend.gateway import Gateway
from agent_fleet.spend.limiter import AdaptiveConfig
from agent_fleet.spend.port import ModelProvider
from agent_fleet.spend.prices import PriceTable, Rates
from agent_fleet.spend.providers import build_provider, provider_kind, resolve_api_key, resolve_base_url
from agent_fleet.spend.retry import RetryPolicy
from agent_fleet.spend.router import Router

__all__ = ["build_gateway", "price_table"]

_KEEP: Any = object()


def price_table(config: FleetConfig) -> PriceTable:
    overrides = {
        name: Rates(input=p.input, output=p.output, cached_input=p.cached_input, cache_write=p.cache_write)
        for name, p in config.prices.items()
    }
    hints = {m.model: provider_kind(m.provider, model=m.model) for m in config.models}
    limits = {m.model: m.max_tokens for m in config.models if m.max_tokens}
    windows = {key: m.context_window for m in config.models if m.context_window for key in (m.model, m.name)}
    return PriceTable(overrides=overrides, provider_hint=hints, output_limits=limits, context_windows=windows)


def build_gateway(
    config: FleetConfig | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    session_tokens: Any = _KEEP,
    session_usd: Decimal | float | str | None = None,
    fleet_usd: Decimal | float | str | None = None,
    concurrency: int | None = None,
    run_id: str | None = None,
    clock: Clock | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Gateway:
    """The gateway for a run (or for ``agent-fleet gateway``). Raises ConfigError on a missing key."""
    cfg = config or FleetConfig()
    env = os.environ if env is None else env
    rl = cfg.rate_limit
    timeout = timeout or cfg.provider.timeout_s
    baseline = concurrency or rl.baseline_concurrency
    max_conn = max(64, baseline * 2)
    routes, aliases, default = _config_providers(
        cfg, model=model, api_key=api_key, base_url=base_url, env=env, timeout=timeout, max_conn=max_conn
    )
    if default is None:
        default = build_provider(
            provider,
            api_key=api_key,
            model=model,
            base_url=base_url,
            timeout=timeout,
            max_connections=max_conn,
            env=env,
        )
    b = cfg.budgets
    gw = Gateway(
        default,
        routes=routes,
        aliases=aliases,
        model_aliases=cfg.aliases,
        clock=clock,
        concurrency=baseline,
        adaptive=AdaptiveConfig(
            baseline=baseline,
            window_s=rl.window_s,
            max_error_rate=rl.max_error_rate,
            max_mean_latency_s=rl.max_mean_latency_s,
        )
        if rl.adaptive
        else False,
        session_tokens=b.session_tokens if session_tokens is _KEEP else session_tokens,
        session_usd=session_usd if session_usd is not None else b.session_usd,
        run_tokens=b.fleet_tokens,
        run_usd=fleet_usd if fleet_usd is not None else b.fleet_usd,
        run_id=run_id,
        budget_mode=b.mode,
        strict_floor=b.strict_floor_tokens,
        prices=price_table(cfg),
        retry=RetryPolicy(max_attempts=rl.max_attempts),
        requests_per_minute=rl.requests_per_minute,
        tokens_per_minute=rl.tokens_per_minute,
        router=Router(cfg.models) if len(cfg.models) > 1 else None,
        give_up_after_s=cfg.provider.give_up_after_s,
        shapes={key: CallShape.of(m) for m in cfg.models for key in (m.name, m.model)},
        timeout_s=timeout,
    )
    for queue, usd in b.queue_usd.items():
        gw.set_queue_budget(queue_account(queue), usd=usd)
    for name, usd in b.model_usd.items():
        gw.set_model_budget(aliases.get(name, name), usd=usd)
    return gw


def _config_providers(
    cfg: FleetConfig,
    *,
    model: str | None,
    api_key: str | None,
    base_url: str | None,
    env: Mapping[str, str],
    timeout: float,
    max_conn: int,
) -> tuple[dict[str, ModelProvider], dict[str, str], ModelProvider | None]:
    """fleet.yaml's models on one provider per endpoint: the routes (by name and by model id), the
    aliases (name → model id), and the default (the model asked for, else the first; None without models)."""
    endpoints: dict[tuple[str, str, str, bool | None, tuple[tuple[str, bool], ...], float], ModelProvider] = {}
    routes: dict[str, ModelProvider] = {}
    aliases: dict[str, str] = {}
    default: ModelProvider | None = None
    for m in cfg.models:
        kind = provider_kind(m.provider, model=m.model)
        if m.base_url:
            url: str | None = m.base_url
        elif m.provider.startswith(("http://", "https://")):
            url = m.provider
        else:
            url = resolve_base_url(base_url, env)
        key_env = m.api_key_env or ""
        quirks = Quirks.declared(m.compat)
        wait = m.timeout_s or timeout  # a model's own limit bounds what the gateway service relays too
        ident = (kind, url or "", key_env, m.responses_api, tuple(sorted(quirks.known.items())), wait)
        p = endpoints.get(ident)
        if p is None:
            key = env.get(key_env) if key_env else None
            if key_env and not key:
                raise ConfigError(f"model {m.name!r}: ${key_env} is not set")
            key = key or api_key or resolve_api_key(kind, env, base_url=url)
            p = build_provider(
                kind,
                api_key=key,
                model=m.model,
                base_url=url,
                timeout=wait,
                max_connections=max_conn,
                name=f"{kind}@{url or 'default'}" + ("+responses" if m.responses_api else ""),
                env=env,
                responses_api=m.responses_api,
                quirks=quirks,
            )
            endpoints[ident] = p
        routes[m.name] = routes[m.model] = p
        aliases[m.name] = m.model
        if default is None or model in (m.name, m.model):
            default = p
    return routes, aliases, default
