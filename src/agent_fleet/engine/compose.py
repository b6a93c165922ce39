"""Building the planes of one engine: the store and the run's lease, the gateway (its providers
probed), the workforce, telemetry; each closed again, in reverse, if a later one fails."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from agent_fleet.clock import Clock
from agent_fleet.cluster import check_store
from agent_fleet.config import load_config
from agent_fleet.dispatch.slots import SessionSlots
from agent_fleet.engine.core import Engine
from agent_fleet.engine.probe import check_provider
from agent_fleet.engine.workforce import Workforce
from agent_fleet.errors import UsageError
from agent_fleet.observe.telemetry import open_telemetry
from agent_fleet.options import RunOptions, with_config
from agent_fleet.runtime import tuned_runtime
from agent_fleet.session.lease import DEFAULT_TTL_S, LeaseKeeper
from agent_fleet.session.store import open_store, resolve_store_url
from agent_fleet.spend.factory import build_gateway
from agent_fleet.spend.gateway import Gateway

__all__ = ["open_engine"]


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
) -> AsyncIterator[Engine]:
    """Open the store, take the run's lease (RunOwned while another engine owns it, unless ``wait``),
    build the provider and the gateway; shut everything down on exit."""
    # What the flags left unset comes from fleet.yaml (the phase API may pass bare options).
    options = with_config(options, load_config(options.config_path))
    url = resolve_store_url(store_url)
    check_store(options.executor, url)  # the Ray executor's hook: its nodes share the log
    log = open_store(url)
    await log.open()
    try:
        lease = await LeaseKeeper.take(log, run_id, wait=wait, ttl=_lease_ttl())
    except BaseException:
        await log.close()
        raise
    lease.start()
    try:
        gateway = await run_gateway(options, run_id=run_id, api_key=api_key, env=env, clock=clock, check=check)
    except BaseException:
        await lease.release()
        await log.close()
        raise
    try:  # reaps what a dead engine left before anything new starts (resume after kill -9)
        workforce = await Workforce.open(
            run_id=run_id,
            config_path=options.config_path,
            gateway=gateway,
            log=log,
            clock=clock,
            agent_cmd=options.agent_cmd,
            agent_format=options.agent_format,
            timeout=options.timeout,
            # the Ray executor's hook: harnesses on a cluster's nodes (dispatch.executor)
            executor=options.executor or "local",
            store_url=url,
            run_epoch=lease.lease.epoch,
            model=options.model,
        )
    except BaseException:
        await gateway.aclose()
        await lease.release()
        await log.close()
        raise
    engine = Engine(
        log=log,
        gateway=gateway,
        clock=clock,
        slots_for=(lambda _o: slots) if slots else None,
        workforce=workforce,
        lease=lease,
    )
    system = "anthropic" if options.provider == "anthropic" or options.model.startswith("claude") else "openai"
    telemetry = None
    try:
        telemetry = open_telemetry(os.environ, system=system)  # off (the default): None, nothing imported
        if telemetry is not None:
            engine.listen(telemetry.heard)
        with tuned_runtime():
            yield engine
    finally:
        await engine.shutdown()
        if telemetry is not None:
            telemetry.close()


async def run_gateway(
    options: RunOptions,
    *,
    run_id: str,
    api_key: str | None,
    env: Mapping[str, str] | None,
    clock: Clock | None,
    check: bool,
) -> Gateway:
    """The run's gateway; with ``check``, every provider it may call is probed first (closed again
    when one does not answer)."""
    gateway = build_gateway(
        load_config(options.config_path),
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
    if check:
        try:
            providers = (gateway.provider, *gateway.routes.values())
            for url in sorted({str(getattr(p, "base_url", "")) for p in providers} - {""}):
                await check_provider(url)
        except BaseException:
            await gateway.aclose()
            raise
    return gateway


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
