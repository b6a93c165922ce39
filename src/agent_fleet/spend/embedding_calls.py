"""Embeddings through the gateway: the same stack as a chat call, one guarded request per batch.

::

    budget   the whole call's estimate must fit every cap that applies (session, run, queue, model),
             else BudgetExhausted and nothing is sent; then each batch reserves its own estimate
    limiter  one concurrency permit per request, then the requests/tokens-per-minute buckets
    retry    breaker/cooldown, classify, retry 429/5xx within the retry budget (``CallSlot.send``)
    meter    the tokens the provider reported, at the model's list input rate; the rest released

One reservation per HTTP request, not per call: a retry then resends only the batch that failed, and
what a batch is charged is exactly the usage its own answer reported. The up-front check of the whole
call keeps a call that cannot fit from paying for its first batches; calls racing it can still use
the room first, and then a later batch is refused (BudgetExhausted) with the earlier ones charged.

Metering: embedding tokens are charged as *input* tokens (``Usage.input_tokens``; there is no
output) and each request counts as one call — in the session's, the model's and the run's tallies in
one step, so ``fleet spent == Σ session spent`` holds exactly as for chat calls. The per-model tally
(keyed by the embedding model) is where embeddings show apart from chat.

The estimate reserved is ``UTF-8 bytes // 3 + 1`` per text (a token covers at least a byte and
English runs near four characters a token, so this starts high), calibrated per model like chat
prompts (estimator key ``<model>#embed``). A server that reports no usage is charged the estimate,
so a budget is never undercounted. The router's fallbacks do not apply: a chat model cannot stand in
for an embedding model, and vectors of two embedding models are not comparable.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from agent_fleet.domain.model import EmbeddingResult
from agent_fleet.domain.usage import Usage
from agent_fleet.errors import BudgetExhausted, ConfigError, ProviderError
from agent_fleet.spend.port import EmbeddingProvider

if TYPE_CHECKING:
    from agent_fleet.spend.gateway import Gateway

__all__ = ["MAX_REQUEST_TOKENS", "embed_through", "embedding_batches", "raw_embedding_estimate"]

# OpenAI caps one embeddings request at 300,000 tokens over all its inputs; batches stay well below
# by estimate (which runs high), so a full batch is never refused for its size.
MAX_REQUEST_TOKENS = 200_000
_ZERO = Decimal(0)


def raw_embedding_estimate(text: str) -> int:
    return len(text.encode("utf-8")) // 3 + 1


def embedding_batches(raws: Sequence[int], *, max_inputs: int, max_tokens: int = MAX_REQUEST_TOKENS) -> list[range]:
    """Consecutive index ranges of at most ``max_inputs`` texts and ``max_tokens`` estimated tokens
    (a single text larger than that goes alone: the provider judges it)."""
    out: list[range] = []
    start, tokens = 0, 0
    for i, raw in enumerate(raws):
        if i > start and (i - start >= max_inputs or tokens + raw > max_tokens):
            out.append(range(start, i))
            start, tokens = i, 0
        tokens += raw
    if start < len(raws):
        out.append(range(start, len(raws)))
    return out


def _no_endpoint(provider: object, model: str) -> ConfigError:
    name = getattr(provider, "name", "the provider")
    return ConfigError(
        f"{name} has no embeddings endpoint, so {model!r} cannot be served there: route embeddings to an "
        "OpenAI-compatible model in fleet.yaml (a models: entry with provider openai or an OpenAI-compatible "
        "URL, e.g. model text-embedding-3-small) and name that model for the embedder"
    )


def _check_room(gw: Gateway, session_id: str, model: str, tokens: int) -> None:
    worst = gw.prices.worst_case(model, tokens, 0)
    for acct in gw.accounts(session_id, model):
        why = acct.room_for(tokens, worst)
        if why is not None:
            raise BudgetExhausted(why, scope=acct.scope)


async def embed_through(
    gw: Gateway, session_id: str, texts: Sequence[str], *, model: str, dimensions: int | None = None
) -> EmbeddingResult:
    """Embed ``texts`` for ``session_id`` (see the module docstring for what is reserved and charged)."""
    provider = gw.provider_for(model)
    resolved = gw.aliases.get(model, model)
    if not resolved:
        raise ConfigError("an embeddings call needs a model name (e.g. text-embedding-3-small)")
    if not isinstance(provider, EmbeddingProvider) or provider.max_embedding_batch <= 0:
        raise _no_endpoint(provider, resolved)
    if not texts:
        return EmbeddingResult([], Usage(), _ZERO, model=resolved)
    # genai-prices finds embedding models only under their provider: give it the endpoint's kind.
    gw.prices.provider_hint.setdefault(resolved, str(getattr(provider, "kind", "openai")))
    key = f"{resolved}#embed"
    raws = [raw_embedding_estimate(t) for t in texts]
    batches = embedding_batches(raws, max_inputs=provider.max_embedding_batch)
    if len(batches) > 1:
        _check_room(gw, session_id, resolved, gw.estimator.estimate_raw(key, sum(raws)))
    vectors: list[list[float]] = []
    usage = Usage()
    cost = _ZERO
    retried: list[str] = []
    for batch in batches:
        part = list(texts[batch.start : batch.stop])
        raw = sum(raws[batch.start : batch.stop])
        prompt = gw.estimator.estimate_raw(key, raw)
        send = functools.partial(provider.embed, part, resolved, dimensions=dimensions)
        async with gw.slot(session_id, model=resolved, prompt_tokens=prompt, max_tokens=0, provider=provider) as slot:
            got, used = await slot.send(send)
            reported = used.input_tokens > 0
            if not reported:
                used = Usage(input_tokens=prompt)
            cost += slot.charge(used)
            retried.extend(slot.retried)
        if len(got) != len(part):  # charged all the same: the provider did the work
            raise ProviderError(f"{provider.name} sent {len(got)} vectors for {len(part)} texts", status=200)
        if reported:
            gw.estimator.observe(key, raw, used.input_tokens)
        vectors.extend(got)
        usage = usage + used
    return EmbeddingResult(vectors, usage, cost, model=resolved, retried=tuple(retried))
