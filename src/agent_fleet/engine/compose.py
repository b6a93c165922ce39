"""Building an engine from one ``FleetConfig``: the store (and a run's lease), the gateway (its
providers probed), the workforce, the queues, telemetry.

Each part is entered on one ``AsyncExitStack`` as it is built, so a failure closes, in reverse,
whatever was built before it; once the engine stands the stack is the engine's, and
``Engine.shutdown`` closes it. fleet.yaml is read once, at the edge and off the event loop, and the
one ``FleetConfig`` is given to every builder. ``deploy``/``resume`` (:func:`open_engine`) and
``serve``'s host build their engines here alike (:func:`assemble`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from agent_fleet.clock import Clock
from agent_fleet.cluster import check_store
from agent_fleet.config import FleetConfig, load_config
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.domain.accounts import AccountScope, queue_account
from agent_fleet.engine.core import Engine, close_workforce
from agent_fleet.engine.preflight import configured_queues
from agent_fleet.engine.probe import check_provider
from agent_fleet.engine.tallies import GroupOf, seed_tallies
from agent_fleet.engine.workforce import Workforce
from agent_fleet.errors import UsageError
from agent_fleet.observe.telemetry import open_telemetry
from agent_fleet.options import RunOptions, with_config
from agent_fleet.runtime import tuned_runtime
from agent_fleet.session.lease import DEFAULT_TTL_S, LeaseKeeper
from agent_fleet.session.store import open_store, resolve_store_url
from agent_fleet.spend.factory import build_gateway
from agent_fleet.spend.gateway import Gateway

__all__ = ["assemble", "open_engine", "probed", "run_gateway"]


@asynccontextmanager
async def open_engine(
    options: RunOptions,
    *,
    run_id: str,
    store_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    check: bool = True,
    slots: SessionSlots | None = None,
    wait: bool = False,
    config: FleetConfig | None = None,
) -> AsyncIterator[Engine]:
    """An engine for one run: open the store, take the run's lease (RunOwned while another engine
    owns it, unless ``wait``), build the provider and the gateway; shut everything down on exit.
    ``config``: fleet.yaml as the caller read it (read here, once, when not given)."""
    if config is None:
        config = await asyncio.to_thread(load_config, options.config_path)
    options = with_config(options, config)  # what the flags left unset comes from fleet.yaml

    def gateway() -> Gateway:
        return run_gateway(options, config, run_id=run_id, api_key=api_key, env=env, clock=clock)

    anthropic = options.provider == "anthropic" or options.model.startswith("claude")
    async with assemble(
        config,
        options.config_path,
        store_url=store_url,
        gateway=gateway,
        check=check,
        workforce_id=run_id,
        lease_run=run_id,
        wait=wait,
        clock=clock,
        slots_for=(lambda _o: slots) if slots else None,
        agent_cmd=options.agent_cmd,
        agent_format=options.agent_format,
        agent_timeout=options.timeout,
        executor=options.executor or "local",
        model=options.model,
        system="anthropic" if anthropic else "openai",
    ) as engine:
        if config.budgets.queue_usd:  # a queue's dollars bind across its runs: what the store says they spent
            await seed_tallies(engine.log, engine.gateway, _budgeted_queues(config))
        yield engine


def _budgeted_queues(config: FleetConfig) -> GroupOf:
    budgeted = {queue_account(q) for q in config.budgets.queue_usd}

    def groups(created: Mapping[str, Any]) -> list[tuple[AccountScope, str]]:
        queue = queue_account((created.get("options") or {}).get("queue"))
        return [(AccountScope.QUEUE, queue)] if queue in budgeted else []

    return groups


@asynccontextmanager
async def assemble(
    config: FleetConfig,
    config_path: str | None,
    *,
    store_url: str | None,
    gateway: Callable[[], Gateway],
    check: bool,
    workforce_id: str,
    lease_run: str | None = None,
    wait: bool = False,
    clock: Clock | None = None,
    slots_for: Callable[[RunOptions], SessionSlots] | None = None,
    agent_cmd: str | None = None,
    agent_format: str = "jsonl",
    agent_timeout: float | None = None,
    executor: str = "local",
    model: str = "",
    system: str = "openai",
) -> AsyncIterator[Engine]:
    """An engine over ``config``: its store, the lease of ``lease_run`` (when given), the gateway
    ``gateway()`` builds (probed with ``check``), the workforce named ``workforce_id`` (its harnesses
    on a Ray cluster's nodes with ``executor``; ``model``: their default), the queues; telemetry when
    the environment asks for it (``system``: the provider's name). On exit the engine's runs are
    stopped and its parts closed."""
    url = resolve_store_url(store_url)
    check_store(executor, url)  # the Ray executor's hook: its nodes share the log
    async with AsyncExitStack() as stack:
        telemetry = open_telemetry(os.environ, system=system)  # off (the default): None, nothing imported
        if telemetry is not None:
            stack.callback(telemetry.close)
        async with AsyncExitStack() as parts:
            log = open_store(url)
            await parts.enter_async_context(log)
            lease = None
            if lease_run is not None:
                lease = await LeaseKeeper.take(log, lease_run, wait=wait, ttl=_lease_ttl())
                parts.push_async_callback(lease.release)  # given back before the log closes
                lease.start()
            built = await parts.enter_async_context(probed(gateway(), check=check))
            # reaps what a dead engine left before anything new starts (resume after kill -9)
            workforce = await Workforce.open(
                run_id=workforce_id,
                config=config,
                config_path=config_path,
                gateway=built,
                log=log,
                clock=clock,
                agent_cmd=agent_cmd,
                agent_format=agent_format,
                timeout=agent_timeout,
                # the Ray executor's hook: harnesses on a cluster's nodes (dispatch.executor)
                executor=executor,
                store_url=url,
                run_epoch=lease.lease.epoch if lease is not None else None,
                model=model,
            )
            parts.push_async_callback(close_workforce, workforce)
            queues = await asyncio.to_thread(configured_queues, config, config_path)
            engine = Engine(
                log=log,
                gateway=built,
                config=config,
                clock=clock,
                slots_for=slots_for,
                workforce=workforce,
                lease=lease,
                queues=queues,
                store=log,
                parts=parts.pop_all(),  # the engine's from here: shutdown() closes them
            )
        stack.push_async_callback(engine.shutdown)
        if telemetry is not None:
            engine.listen(telemetry.heard)
        stack.enter_context(tuned_runtime())
        yield engine


def run_gateway(
    options: RunOptions,
    config: FleetConfig,
    *,
    run_id: str,
    api_key: str | None,
    env: Mapping[str, str] | None,
    clock: Clock | None = None,
) -> Gateway:
    """The gateway of one run: its provider and model, its budgets, its concurrency."""
    return build_gateway(
        config,
        provider=options.provider,
        model=options.model,
        api_key=api_key,
        session_tokens=options.budget_tokens,
        session_usd=options.budget_usd,
        fleet_usd=options.fleet_budget_usd,
        concurrency=options.max_concurrency or None,
        run_id=run_id,
        clock=clock,
        env=env,
    )


@asynccontextmanager
async def probed(gateway: Gateway, *, check: bool = True) -> AsyncIterator[Gateway]:
    """The gateway, closed on exit; with ``check``, every provider it may call is probed first
    (ProviderUnreachable, exit 4, when one does not answer)."""
    try:
        if check:
            providers = (gateway.provider, *gateway.routes.values())
            for url in sorted({str(getattr(p, "base_url", "")) for p in providers} - {""}):
                await check_provider(url)
        yield gateway
    finally:
        await gateway.aclose()


def _lease_ttl() -> float:
    """Seconds a run's lease outlives its last heartbeat (``FLEET_LEASE_TTL``, default 30)."""
    raw = os.environ.get("FLEET_LEASE_TTL", "").strip()
    if not raw:
        return DEFAULT_TTL_S
    try:
        ttl = float(raw)
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise UsageError(f"FLEET_LEASE_TTL must be a positive number of seconds, got {raw!r}")
    return ttl
