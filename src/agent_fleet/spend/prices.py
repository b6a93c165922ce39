"""List prices: the offline genai-prices table, with per-model overrides from fleet.yaml; output limits.

A model's rates are looked up once and kept; pricing a call is then a handful of Decimal
multiplications. Cached input tokens are priced at the cache-read rate *instead of* the input rate
(``Usage.input_tokens`` includes them), cache writes at the cache-write rate, never twice.
What a provider reports as cost (``cost: 0`` on streams, say) is never used: tokens are priced here.

Output limits (the most output tokens one call of a model can produce) size the reservation of a
request that sets no limit, and clamp ``max_tokens`` when a route substitutes a model: a fleet.yaml
``max_tokens`` for the model first, then the providers' published limits (:data:`OUTPUT_LIMITS`, the
longest matching prefix), then the model's context window from genai-prices, capped at
:data:`DEFAULT_OUTPUT_LIMIT` — which is also the answer for a model nobody knows.

Context windows (the most tokens one request — prompt plus output — may hold) keep a conversation
inside its model's window (the harness's context care): a fleet.yaml ``context_window`` for the model
first, then genai-prices, then :data:`DEFAULT_CONTEXT_WINDOW`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from genai_prices import Usage as GUsage
from genai_prices import calc_price

from agent_fleet.domain.usage import Usage
from agent_fleet.errors import ConfigError

__all__ = ["DEFAULT_CONTEXT_WINDOW", "DEFAULT_OUTPUT_LIMIT", "OUTPUT_LIMITS", "PriceTable", "Rates"]

_MTOK = Decimal(1_000_000)
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """US dollars per million tokens. ``tiers``: (input-token threshold, rates above it), ascending."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None  # None: same as input
    cache_write: Decimal | None = None  # None: same as input
    tiers: tuple[tuple[int, Rates], ...] = ()
    known: bool = True  # False when the model is in no table and no override: cost shows as 0

    def for_prompt(self, input_tokens: int) -> Rates:
        chosen = self
        for start, rates in self.tiers:
            if input_tokens > start:
                chosen = rates
        return chosen

    def cost(self, usage: Usage) -> Decimal:
        r = self.for_prompt(usage.input_tokens) if self.tiers else self
        cached = usage.cached_input_tokens
        writes = usage.cache_write_tokens
        plain = max(0, usage.input_tokens - cached - writes)
        total = plain * r.input + usage.output_tokens * r.output
        if cached:
            total += cached * (r.input if r.cached_input is None else r.cached_input)
        if writes:
            total += writes * (r.input if r.cache_write is None else r.cache_write)
        return total / _MTOK

    def worst_case(self, prompt_tokens: int, max_tokens: int) -> Decimal:
        """The most a call can cost: every prompt token at the dearest input rate, all output produced."""
        r = self.for_prompt(prompt_tokens) if self.tiers else self
        dearest = max(r.input, r.cache_write or _ZERO, r.cached_input or _ZERO)
        return (prompt_tokens * dearest + max_tokens * r.output) / _MTOK

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Rates:
        """``{input, output, cached_input?, cache_write?}`` in $/MTok (fleet.yaml overrides)."""
        try:
            return cls(
                input=Decimal(str(data["input"])),
                output=Decimal(str(data["output"])),
                cached_input=None if data.get("cached_input") is None else Decimal(str(data["cached_input"])),
                cache_write=None if data.get("cache_write") is None else Decimal(str(data["cache_write"])),
            )
        except (KeyError, ArithmeticError, ValueError):
            raise ConfigError(f"a price override needs input and output in $/MTok: {dict(data)!r}") from None


_UNKNOWN = Rates(input=_ZERO, output=_ZERO, known=False)

DEFAULT_OUTPUT_LIMIT = 32_768
DEFAULT_CONTEXT_WINDOW = 128_000  # a model nobody knows: the smallest window of today's frontier models
# Published maximum output tokens per call (OpenAI and Anthropic model pages); the longest prefix wins.
OUTPUT_LIMITS: dict[str, int] = {
    "gpt-5": 128_000,
    "gpt-4.1": 32_768,
    "gpt-4o": 16_384,
    "gpt-4-turbo": 4_096,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 4_096,
    "o1-mini": 65_536,
    "o1": 100_000,
    "o3": 100_000,
    "o4-mini": 100_000,
    "codex-mini": 100_000,
    "claude-opus-4-8": 128_000,
    "claude-opus-4-7": 128_000,
    "claude-opus-4-6": 128_000,
    "claude-sonnet-4-6": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-sonnet-4-5": 64_000,
    "claude-haiku-4-5": 64_000,
    "claude-opus-4-1": 32_000,
    "claude-opus-4": 32_000,
    "claude-sonnet-4": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-3-5-sonnet": 8_192,
    "claude-3-5-haiku": 8_192,
    "claude-3-opus": 4_096,
    "claude-3-haiku": 4_096,
}


def _published_limit(model: str) -> int | None:
    name = model.rsplit("/", 1)[-1].lower()
    best = ""
    for prefix in OUTPUT_LIMITS:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return OUTPUT_LIMITS[best] if best else None


def _context_window(model: str) -> int | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            window = calc_price(GUsage(input_tokens=1), model).model.context_window
    except (LookupError, ValueError, AttributeError):
        return None
    return int(window) if window else None


def _tiered(value: Any) -> tuple[Decimal, list[tuple[int, Decimal]]]:
    if value is None:
        return _ZERO, []
    if isinstance(value, Decimal):
        return value, []
    base = getattr(value, "base", None)
    tiers = [(int(t.start), Decimal(t.price)) for t in getattr(value, "tiers", ())]
    return (Decimal(base) if base is not None else _ZERO), tiers


def _from_genai(model: str, provider: str | None) -> Rates | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calc = calc_price(GUsage(input_tokens=1), model, provider_id=provider) if provider else None
            if calc is None:
                calc = calc_price(GUsage(input_tokens=1), model)
    except (LookupError, ValueError):
        return None
    mp = calc.model_price
    fields = {
        "input": _tiered(getattr(mp, "input_mtok", None)),
        "output": _tiered(getattr(mp, "output_mtok", None)),
        "cached_input": _tiered(getattr(mp, "cache_read_mtok", None)),
        "cache_write": _tiered(getattr(mp, "cache_write_mtok", None)),
    }
    has = {
        "cached_input": getattr(mp, "cache_read_mtok", None) is not None,
        "cache_write": getattr(mp, "cache_write_mtok", None) is not None,
    }

    def at(threshold: int | None) -> Rates:
        def pick(name: str) -> Decimal:
            price, tiers = fields[name]
            for start, tier_price in tiers:
                if threshold is not None and start <= threshold:
                    price = tier_price
            return price

        return Rates(
            input=pick("input"),
            output=pick("output"),
            cached_input=pick("cached_input") if has["cached_input"] else None,
            cache_write=pick("cache_write") if has["cache_write"] else None,
        )

    starts = sorted({start for _, tiers in fields.values() for start, _ in tiers})
    base = at(None)
    if not starts:
        return base
    return Rates(
        input=base.input,
        output=base.output,
        cached_input=base.cached_input,
        cache_write=base.cache_write,
        tiers=tuple((start, at(start)) for start in starts),
    )


@dataclass(slots=True)
class PriceTable:
    """Rates by model name: overrides first, then genai-prices, else unknown (priced at zero, flagged)."""

    overrides: dict[str, Rates] = field(default_factory=dict)
    provider_hint: dict[str, str] = field(default_factory=dict)  # model -> genai-prices provider id
    output_limits: dict[str, int] = field(default_factory=dict)  # model -> its max output tokens (fleet.yaml)
    context_windows: dict[str, int] = field(default_factory=dict)  # model -> its context window (fleet.yaml)
    _cache: dict[str, Rates] = field(default_factory=dict, repr=False)
    _limits: dict[str, int] = field(default_factory=dict, repr=False)
    _windows: dict[str, int | None] = field(default_factory=dict, repr=False)  # genai-prices', looked up once

    def rates(self, model: str) -> Rates:
        found = self._cache.get(model)
        if found is None:
            found = self.overrides.get(model) or _from_genai(model, self.provider_hint.get(model)) or _UNKNOWN
            self._cache[model] = found
        return found

    def cost(self, model: str, usage: Usage) -> Decimal:
        return self.rates(model).cost(usage)

    def worst_case(self, model: str, prompt_tokens: int, max_tokens: int) -> Decimal:
        return self.rates(model).worst_case(prompt_tokens, max_tokens)

    def known(self, model: str) -> bool:
        return self.rates(model).known

    def output_limit(self, model: str) -> int:
        """The most output tokens one call of ``model`` can produce (see the module docstring)."""
        found = self._limits.get(model)
        if found is None:
            found = self.output_limits.get(model) or _published_limit(model)
            if found is None:
                window = _context_window(model)
                found = min(window, DEFAULT_OUTPUT_LIMIT) if window else DEFAULT_OUTPUT_LIMIT
            self._limits[model] = found
        return found

    def context_window(self, model: str) -> int:
        """The most tokens (prompt plus output) one request to ``model`` may hold (the module docstring)."""
        # Asked on every request a session sends (context care): the table's lookup is kept per model.
        found = self.context_windows.get(model)
        if found:
            return found
        if model not in self._windows:
            self._windows[model] = _context_window(model)
        return self._windows[model] or DEFAULT_CONTEXT_WINDOW
