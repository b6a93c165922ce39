"""The in-process gateway: every model call of the fleet passes here.

One call goes down a stack of small steps::

    budget   reserve on every cap that applies (spend.budget's rule), or raise BudgetExhausted (nothing sent)
    limiter  one concurrency permit (adaptive limit), then the requests/tokens-per-minute buckets
    retry    breaker/cooldown wait, send, classify; retry 429/overload within the retry budget
    meter    charge the real usage at list price; settle the reservation
    provider one HTTP request

The steps live in :class:`~agent_fleet.spend.call.CallSlot`, which the HTTP service uses too. The
overshoot bound a budget guarantees is stated (and tested) in :mod:`agent_fleet.spend.budget`. With a
:class:`~agent_fleet.spend.router.Router`, a call whose model is out of quota, over its model budget
or failing for good moves to the next model of the declared chain (``on_route`` hears each decision).

Every exit path — success, provider error, timeout, cancellation — settles the reservation and
returns the permit (``finally`` blocks; the tests count both after 10,000 mixed calls). Charged: on
success the reported usage at list rates; for an error the provider answered (429, 5xx, 4xx) nothing;
for a request that may have been processed but whose answer never came (read timeout, cancellation
on the wire) its reservation, so a budget is never undercounted.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from agent_fleet.clock import Clock, RealClock
from agent_fleet.domain.accounts import AccountScope
from agent_fleet.domain.calls import CallShape, filled
from agent_fleet.domain.error_kinds import error_kind
from agent_fleet.domain.model import ChatRequest, ChatResponse, EmbeddingResult
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import (
    BudgetExhausted,
    OutOfQuota,
    Overloaded,
    ProviderDown,
    ProviderUnreachable,
    QuotaExhausted,
)
from agent_fleet.spend.budget import UNSET, Account, BudgetBook
from agent_fleet.spend.call import CallSlot
from agent_fleet.spend.embedding_calls import embed_through
from agent_fleet.spend.estimate import PromptEstimator
from agent_fleet.spend.gateway_state import GatewayStatistics, apply_budget_event
from agent_fleet.spend.groups import RunGroups, restore_session
from agent_fleet.spend.limiter import AdaptiveConfig, ConcurrencyLimiter, WindowVerdict
from agent_fleet.spend.meter import Meter, Tally
from agent_fleet.spend.model_breaker import BreakerConfig
from agent_fleet.spend.patience import DEFAULT_SILENCE_S, Pace, answer_limit, worth_streaming
from agent_fleet.spend.port import ModelProvider
from agent_fleet.spend.prices import PriceTable
from agent_fleet.spend.provider_health import DEFAULT_GIVE_UP_AFTER_S
from agent_fleet.spend.retry import RetryPolicy, fallback_cause
from agent_fleet.spend.router import Router
from agent_fleet.spend.traffic import Traffic

__all__ = ["Gateway", "GatewayStatistics", "apply_budget_event"]


_ZERO = Decimal(0)


def _usd(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def _caps(tokens: Any, usd: Any) -> dict[str, Any]:  # for BudgetBook.set_cap: None leaves a cap as it is
    return {k: v for k, v in (("tokens", tokens), ("usd", usd)) if v is not None}


class Gateway:
    """Implements :class:`~agent_fleet.spend.port.ModelGateway` (and ``EmbeddingGateway``) over one or
    more providers."""

    def __init__(
        self,
        provider: ModelProvider,
        *,
        routes: Mapping[str, ModelProvider] | None = None,
        aliases: Mapping[str, str] | None = None,
        model_aliases: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        concurrency: int = 50,
        adaptive: AdaptiveConfig | bool = True,
        session_tokens: int | None = 128_000,
        session_usd: Decimal | float | str | None = None,
        run_tokens: int | None = None,
        run_usd: Decimal | float | str | None = None,
        run_id: str | None = None,
        budget_mode: str = "bounded",
        strict_floor: int = 1024,
        prices: PriceTable | None = None,
        retry: RetryPolicy | None = None,
        breaker: BreakerConfig | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        estimator: PromptEstimator | None = None,
        estimate_prompt: Callable[[ChatRequest], int] | None = None,
        rand: Callable[[], float] | None = None,
        router: Router | None = None,
        on_route: Callable[[str, dict[str, str]], None] | None = None,
        give_up_after_s: float = DEFAULT_GIVE_UP_AFTER_S,
        shapes: Mapping[str, CallShape] | None = None,
        timeout_s: float = DEFAULT_SILENCE_S,
    ) -> None:
        self.provider = provider
        self.routes: dict[str, ModelProvider] = dict(routes or {})
        self.aliases: dict[str, str] = dict(aliases or {})  # fleet.yaml model name -> provider model id
        self.model_aliases: dict[str, str] = dict(model_aliases or {})  # fleet.yaml aliases: (spend.routes)
        self.clock: Clock = clock or RealClock()
        self.run_id = run_id
        self.prices = prices or PriceTable()
        self.retry = retry or RetryPolicy()
        self.book = BudgetBook(
            session_tokens=session_tokens,
            session_usd=_usd(session_usd),
            run_tokens=run_tokens,
            run_usd=_usd(run_usd),
            run_key=run_id or "fleet",
            mode=budget_mode,
            strict_floor=strict_floor,
        )
        self.meter = Meter()
        self.groups = RunGroups(self.book, self.meter)  # a run's queue and team accounts (spend.groups)
        self.estimator = estimator or PromptEstimator()
        self._estimate_prompt = estimate_prompt
        self.rand: Callable[[], float] = rand or random.random  # the retry delays' jitter
        self.router = router
        self.on_route = on_route  # told of every fallback decision: (session_id, {model, name, tier, reason})
        if adaptive is True:
            adaptive = AdaptiveConfig(baseline=concurrency)
        self.traffic = Traffic(
            self.clock,
            concurrency=concurrency,
            adaptive=adaptive if isinstance(adaptive, AdaptiveConfig) else None,
            breaker=breaker or BreakerConfig(),
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            give_up_after_s=give_up_after_s,
        )
        # fleet.yaml models[] by name and model id: what a call leaves unset is filled from its model's entry
        self.shapes: dict[str, CallShape] = dict(shapes or {})
        self.timeout_s = timeout_s  # how long a server may stay silent (a model's own timeout_s wins)
        self._paces: dict[tuple[str, str], Pace] = {}
        self._session_accounts: dict[str, tuple[Account, ...]] = {}
        self._session_queue: dict[str, str] = {}
        self._restored: dict[str, tuple[Usage, Decimal]] = {}
        self._closed = False
        for p in (provider, *self.routes.values()):
            self.traffic.lane(p)

    # --- wiring ---------------------------------------------------------------------------------

    @property
    def verdicts(self) -> Sequence[tuple[str, WindowVerdict]]:
        """The adaptive limits' recent changes: (provider, verdict)."""
        return self.traffic.verdicts

    def provider_down(self) -> ProviderDown | None:
        """Why the run must stop now (a provider refused the credentials, or has had no success for
        ``give_up_after_s`` while failing), else None. See :mod:`agent_fleet.spend.provider_health`."""
        return self.traffic.provider_down()

    def provider_for(self, model: str) -> ModelProvider:
        return self.routes.get(model, self.provider) if model else self.provider

    def register_session(self, session_id: str, *, queue: str | None = None) -> None:
        """Put a session under a team/queue account as well (before its first call)."""
        if queue is not None:
            self._session_queue[session_id] = queue
        self._session_accounts.pop(session_id, None)

    def assign_run(self, run_id: str, *, queue: str | None = None, team: str | None = None) -> None:
        """Charge every call of the run (any session id ``RUN.…``) to its LocalQueue's and its team's
        accounts too (:mod:`agent_fleet.spend.groups`); before its first call."""
        self.groups.assign(run_id, queue=queue, team=team)
        self._session_accounts.clear()

    def accounts(self, session_id: str, model: str) -> tuple[Account, ...]:
        accts = self._session_accounts.get(session_id)
        if accts is None:
            book = self.book
            base = [book.account(AccountScope.SESSION, session_id), book.run]
            queue = self._session_queue.get(session_id)
            if queue is not None:
                base.append(book.account(AccountScope.QUEUE, queue))
            base += [a for a in self.groups.accounts(session_id) if a not in base]
            accts = self._session_accounts[session_id] = tuple(base)
        model_acct = self.book.find(AccountScope.MODEL, model)
        return accts if model_acct is None else (*accts, model_acct)

    # --- the call -------------------------------------------------------------------------------

    def slot(
        self,
        session_id: str,
        *,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
        provider: ModelProvider | None = None,
    ) -> CallSlot:
        """A guarded call for ``session_id`` (see :mod:`agent_fleet.spend.call`); use with ``async with``."""
        provider = provider or self.provider_for(model)
        lane = self.traffic.lanes.get(provider.name) or self.traffic.lane(provider)
        return CallSlot(
            self,
            lane,
            session_id=session_id,
            provider_name=provider.name,
            model=model or getattr(provider, "model", ""),
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
        )

    def estimate_prompt(self, model: str, request: ChatRequest) -> tuple[int, int]:
        """(raw, calibrated) prompt-token estimate used for reservations."""
        if self._estimate_prompt is not None:
            n = self._estimate_prompt(request)
            return n, n
        return self.estimator.estimate(model, request)

    async def complete(self, session_id: str, request: ChatRequest) -> ChatResponse:
        """One model call for ``session_id``; with a router, failures fall back along the declared chain.
        Out of quota with nowhere left to go stops the run: :class:`OutOfQuota`, and the provider's
        health says so (``provider_down``)."""
        try:
            return await self._complete_routed(session_id, request)
        except QuotaExhausted as exc:
            if isinstance(exc, OutOfQuota):
                raise
            raise self._out_of_quota(request.model, exc) from None

    def _out_of_quota(self, model: str, exc: QuotaExhausted) -> OutOfQuota:
        lane = self.traffic.lanes.get(self.provider_for(model).name)
        out = OutOfQuota(str(exc), status=exc.status)
        out.retried, out.model = getattr(exc, "retried", ()), getattr(exc, "model", model)  # type: ignore[attr-defined]
        if lane is not None and lane.health is not None and lane.health.refused is None:
            lane.health.refused = f"provider {lane.health.name} is out of quota: {exc}; the run is resumable"
        return out

    async def _complete_routed(self, session_id: str, request: ChatRequest) -> ChatResponse:
        if self.router is None:
            return await self._complete_once(session_id, request)
        tried: set[str] = set()
        failed: tuple[str, ...] = ()  # the kinds of the attempts on models fallen back from
        while True:
            try:
                response = await self._complete_once(session_id, request)
                return replace(response, retried=failed + response.retried) if failed else response
            except (QuotaExhausted, BudgetExhausted, Overloaded, ProviderUnreachable) as exc:
                cause = fallback_cause(exc)
                earlier = failed
                if not isinstance(exc, BudgetExhausted):
                    failed += (*getattr(exc, "retried", ()), str(error_kind(exc)))
                exc.retried = earlier + tuple(getattr(exc, "retried", ()))  # type: ignore[union-attr]
                if cause is None:
                    raise
                model = self.aliases.get(request.model, request.model) or getattr(self.provider, "model", "")
                tried.add(model)
                route = self.router.fallback(model, cause=cause, unavailable=tried | self.traffic.exhausted)
                if route is None:
                    raise
                if self.on_route is not None:
                    self.on_route(session_id, route.to_event())
                request = replace(request, model=route.model)

    async def _complete_once(self, session_id: str, request: ChatRequest) -> ChatResponse:
        provider = self.provider_for(request.model)
        model = self.aliases.get(request.model, request.model) or getattr(provider, "model", "")
        if model != request.model:
            request = replace(request, model=model)
        shape = self.shapes.get(model)
        if shape is not None:
            request = filled(request, shape)
        raw, prompt = self.estimate_prompt(model, request)
        silence = shape.timeout_s if shape is not None and shape.timeout_s else self.timeout_s
        pace = self._paces.get((provider.name, model))
        if pace is None:
            pace = self._paces[(provider.name, model)] = Pace()
        async with self.slot(
            session_id, model=model, prompt_tokens=prompt, max_tokens=request.max_tokens, provider=provider
        ) as slot:
            # a strict budget may have lowered max_tokens to what is left
            sent = request if slot.max_tokens == request.max_tokens else replace(request, max_tokens=slot.max_tokens)
            patience = None
            if getattr(provider, "watched", False):  # it reports progress (spend.patience) and has no limit of its own
                whole = answer_limit(
                    silence_s=silence,
                    max_tokens=slot.max_tokens,
                    pace=pace,
                    streaming=False,
                    in_flight=slot.lane.limiter.statistics().in_use,
                )
                patience = (silence, whole, worth_streaming(silence_s=silence, max_tokens=slot.max_tokens, pace=pace))
            response = await slot.send(lambda: provider.complete(sent), patience=patience)
            if response.usage.total_tokens == 0 and (response.content or response.tool_calls):
                # an answer without usage (a stream that carried none): charged what was held for it
                response = replace(response, usage=slot.held_usage())
            cost = slot.charge(response.usage)
        pace.observe(slot.answered_in, response.usage.output_tokens)
        if self._estimate_prompt is None:
            self.estimator.observe(model, raw, response.usage.input_tokens)
        return replace(response, cost_usd=cost, retried=tuple(slot.retried))

    async def embed(
        self, session_id: str, texts: Sequence[str], *, model: str, dimensions: int | None = None
    ) -> EmbeddingResult:
        """Embed ``texts`` for ``session_id`` through the same stack as ``complete`` (one guarded request
        per batch; tokens metered as input tokens). Raises BudgetExhausted before sending when the call
        would cross a cap, ConfigError when ``model``'s provider has no embeddings endpoint.
        See :mod:`agent_fleet.spend.embedding_calls`."""
        return await embed_through(self, session_id, texts, model=model, dimensions=dimensions)

    # --- budgets and state ----------------------------------------------------------------------

    def restore_spent(self, session_id: str, usage: Usage, cost_usd: Decimal) -> None:
        """Seed what a session had spent outside this gateway (replayed from its log on resume).

        ``usage``/``cost_usd`` are the session's whole spend as its log holds it. What this gateway
        already charged live for the session is in that figure too, so only the rest is restored —
        calling it again, on every attempt, never counts a call twice.
        """
        queue = self._session_queue.get(session_id)
        restore_session(self._restored, self.groups, session_id, usage, cost_usd, queue=queue)

    def unanswered_charge(self, request: ChatRequest) -> tuple[Usage, Decimal]:
        """A request recorded without its response, as a reservation: the prompt estimate plus the most it
        could answer (its ``max_tokens``, at most the model's output limit), priced at the worst case."""
        model = self.aliases.get(request.model, request.model) or getattr(self.provider_for(request.model), "model", "")
        shape = self.shapes.get(model)
        if shape is not None:
            request = filled(request, shape)
        _, prompt = self.estimate_prompt(model, request)
        out = min(request.max_tokens, self.prices.output_limit(model))
        return Usage(prompt, out), self.prices.worst_case(model, prompt, out)

    def set_session_budget(self, session_id: str, tokens: int | None = None, usd: Any = None) -> None:
        """Raise or lower one session's caps (None leaves a cap as it is). Lowering stops new calls at once."""
        self.book.set_cap(AccountScope.SESSION, session_id, **_caps(tokens, usd))

    def set_run_budget(self, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        """The fleet caps (None removes one)."""
        self.book.set_cap(AccountScope.RUN, self.book.run.key, tokens=tokens, usd=usd)

    def set_default_session_budget(self, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        """Caps for sessions not seen yet (existing sessions keep theirs)."""
        self.book.set_default(AccountScope.SESSION, tokens=tokens, usd=usd)

    def set_all_session_budgets(self, tokens: int | None = None, usd: Any = None) -> None:
        """The default and every known session's cap at once (a run-wide raise)."""
        kwargs = _caps(tokens, usd)
        self.book.set_default(AccountScope.SESSION, **kwargs)
        for scope, key in list(self.book.accounts):
            if scope == AccountScope.SESSION:
                self.book.set_cap(scope, key, **kwargs)

    def set_queue_budget(self, queue: str, *, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        self.book.set_cap(AccountScope.QUEUE, queue, tokens=tokens, usd=usd)

    def set_team_budget(self, team: str, *, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        self.book.set_cap(AccountScope.TEAM, team, tokens=tokens, usd=usd)

    def set_model_budget(self, model: str, *, tokens: Any = UNSET, usd: Any = UNSET) -> None:
        self.book.set_cap(AccountScope.MODEL, model, tokens=tokens, usd=usd)

    def session_budget(self, session_id: str) -> dict[str, Any]:
        return self.book.account(AccountScope.SESSION, session_id).to_dict()

    def session_usage(self, session_id: str) -> Tally:
        return self.meter.session(session_id)

    @property
    def limiter(self) -> ConcurrencyLimiter:
        """The default provider's concurrency limiter."""
        return self.traffic.lanes[self.provider.name].limiter

    def set_concurrency(self, total: int) -> None:
        """Set the baseline (and current) concurrency of every provider, at run time."""
        self.traffic.set_concurrency(total)

    def exhausted_models(self) -> frozenset[str]:
        return frozenset(self.traffic.exhausted)

    def statistics(self) -> GatewayStatistics:
        traffic = self.traffic
        traffic.tick_all()
        tokens, usd, n = self.book.reserved_total()
        return GatewayStatistics(
            concurrency=self.limiter.statistics(),
            in_flight=traffic.in_flight,
            reserved_tokens=tokens,
            reserved_usd=usd,
            open_reservations=n,
            run=self.meter.run.to_dict(),
            breakers={f"{p}/{m}": str(b.state) for (p, m), b in traffic.breakers.items()},
            exhausted_models=tuple(sorted(traffic.exhausted)),
            limits={name: lane.limiter.total for name, lane in traffic.lanes.items()},
        )

    async def aclose(self) -> None:
        """Close every provider's HTTP client. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        seen: set[int] = set()
        for p in (self.provider, *self.routes.values()):
            if id(p) not in seen:
                seen.add(id(p))
                await p.aclose()

    def __repr__(self) -> str:
        return (
            f"<Gateway providers={sorted(self.traffic.lanes)} in_flight={self.traffic.in_flight} "
            f"limit={self.limiter.total} calls={self.meter.run.calls}>"
        )
